#!/usr/bin/env bash
# Puts a real Elasticsearch server (the official integ-test-zip distribution, resolved
# from Maven Central by Maven) into the cache, for the test harness to start on loopback.
#   fetch-elasticsearch.sh [VERSION]   (default: $ELASTICSEARCH_VERSION, the 8.19 line)
# Prints the distribution's home on stdout; a second run with the same version does nothing.
# Why not org.codelibs:elasticsearch-cluster-runner: Maven Central only carries it up to
# 7.10.2.0; its 8.x releases live in a repository this project cannot rely on.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

version="${1:-$ELASTICSEARCH_VERSION}"
es_home="$HVDLOG_CACHE/elasticsearch-$version"
[ -x "$es_home/bin/elasticsearch" ] && { echo "$es_home"; exit 0; }

command -v java >/dev/null || ensure_debs openjdk-17-jre-headless
command -v mvn >/dev/null || ensure_debs maven
command -v unzip >/dev/null || ensure_debs unzip
log "resolving Elasticsearch $version from Maven Central"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mvn -q -B dependency:copy \
  "-Dartifact=org.elasticsearch.distribution.integ-test-zip:elasticsearch:$version:zip" \
  "-DoutputDirectory=$work" >&2 || die "Maven could not resolve the Elasticsearch $version distribution"
unzip -q "$work/elasticsearch-$version.zip" -d "$work"
# Readable by the unprivileged user the harness runs it as (Elasticsearch refuses root).
chmod -R a+rX "$work/elasticsearch-$version"
mkdir -p "$HVDLOG_CACHE"
mv "$work/elasticsearch-$version" "$es_home"
echo "$es_home"
