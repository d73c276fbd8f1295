#!/usr/bin/env bash
# Builds a real Filebeat (the `filebeat` command of github.com/elastic/beats/v7) from the
# Go module proxy into $HVDLOG_CACHE/filebeat-<version>/ and prints the binary's path on
# stdout. Idempotent; the cold build takes about 5 minutes
# and 570 MB of downloads on 2 cores (README.md, the bootstrap table); only the ~70 MB binary is kept.
#
# Why 7.17: the proxy serves github.com/elastic/beats/v7 only at v7.x tags; the 8.x tags
# are not valid versions of a /v7 module path, so 8.19 cannot be fetched this way. The
# tests run shipper/filebeat.yml (written for 8.19) on this 7.17 build: every option it
# uses exists in both (filestream, ndjson/multiline parsers, dissect, disk queue).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

version="${HVDLOG_FILEBEAT_VERSION:-v7.17.29}"
dest="$HVDLOG_CACHE/filebeat-$version"
if [ ! -x "$dest/filebeat" ]; then
  command -v go >/dev/null || die "building Filebeat needs Go (https://go.dev/dl/ or Debian's golang-go)"
  log "building Filebeat $version from the Go module proxy (once, about 5 minutes, 570 MB download)"
  work="$(mktemp -d)"
  trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
  export GOMODCACHE="$work/mod" GOCACHE="$work/cache" GOTOOLCHAIN=local GOFLAGS=-mod=mod
  dir="$(cd "$work" && go mod download -json "github.com/elastic/beats/v7@$version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')" \
    || die "the Go module proxy did not serve github.com/elastic/beats/v7@$version"
  # Built inside the beats module itself so its go.mod replace directives apply.
  cp -r "$dir" "$work/src" && chmod -R u+w "$work/src"
  mkdir -p "$dest.partial"
  ( cd "$work/src" && nice go build -ldflags "-s -w" -o "$dest.partial/filebeat" ./filebeat >&2 ) \
    || { rm -rf "$dest.partial"; die "go build of Filebeat $version failed (output above)"; }
  rm -rf "$dest" && mv "$dest.partial" "$dest"
fi
echo "$dest/filebeat"
