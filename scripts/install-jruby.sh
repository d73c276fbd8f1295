#!/usr/bin/env bash
# Installs jruby-complete (Maven Central) into $HVDLOG_CACHE/jruby-<version>/: the tests run
# logstash/pipeline/horovod_native.rb (the ruby filter of the horovod-native pipeline)
# in the JRuby line Logstash 8.19 ships, since no Logstash can run here. Idempotent;
# prints nothing on stdout.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

dest="$HVDLOG_CACHE/jruby-$JRUBY_VERSION"
jar="$dest/jruby-complete.jar"
[ -s "$jar" ] && exit 0
url="https://repo1.maven.org/maven2/org/jruby/jruby-complete/$JRUBY_VERSION/jruby-complete-$JRUBY_VERSION.jar"
log "downloading jruby-complete $JRUBY_VERSION from Maven Central (about 33 MB, once)"
mkdir -p "$dest"
curl -fsSL "$url" -o "$jar.partial" || { rm -f "$jar.partial"; die "could not download $url: is Maven Central reachable?"; }
expected="$(curl -fsSL "$url.sha1" | cut -c1-40)" || die "could not download $url.sha1"
actual="$(sha1sum "$jar.partial" | cut -c1-40)"
[ "$expected" = "$actual" ] || { rm -f "$jar.partial"; die "jruby-complete $JRUBY_VERSION: checksum $actual, Maven Central says $expected"; }
mv "$jar.partial" "$jar"
