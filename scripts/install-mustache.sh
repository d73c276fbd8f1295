#!/usr/bin/env bash
# Installs mustache (github.com/breml/logstash-config), the Logstash config parser/linter
# the tests run on logstash/, into $HVDLOG_CACHE/mustache-<version>/ from the Go module
# proxy. Idempotent. Prints nothing on stdout (bootstrap.sh's stdout is eval'd).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

dest="$HVDLOG_CACHE/mustache-$MUSTACHE_VERSION"
if [ -x "$dest/mustache" ]; then
  exit 0
fi
command -v go >/dev/null || ensure_debs golang-go
command -v go >/dev/null || die "mustache needs Go (https://go.dev/dl/ or Debian's golang-go) to build github.com/breml/logstash-config"
log "building mustache $MUSTACHE_VERSION from the Go module proxy (once)"
# `go install pkg@version` asks the proxy for the module's version list (deprecation
# check), which some proxies refuse; `go get` + `go build` in a throwaway module does not.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$dest.partial"
( cd "$work" && go mod init hvdlog-mustache-build >&2 \
  && GOFLAGS=-mod=mod go get "github.com/breml/logstash-config/cmd/mustache@$MUSTACHE_VERSION" >&2 \
  && GOFLAGS=-mod=mod go build -o "$dest.partial/mustache" github.com/breml/logstash-config/cmd/mustache >&2 ) \
  || { rm -rf "$dest.partial"; die "could not build github.com/breml/logstash-config/cmd/mustache@$MUSTACHE_VERSION: is the Go module proxy reachable?"; }
rm -rf "$dest" && mv "$dest.partial" "$dest"
