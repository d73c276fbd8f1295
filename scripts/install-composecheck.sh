#!/usr/bin/env bash
# Builds composecheck (tests/support/composecheck: compose-go, the loader docker compose uses)
# into $HVDLOG_CACHE/composecheck-<compose-go version>-<source hash>/ from the Go module
# proxy, and prints that binary's path on stdout. Idempotent: a changed source or a new
# compose-go version in go.mod gives a new cache entry; an unchanged one takes no time.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

src="$REPO_ROOT/tests/support/composecheck"
version="$(awk '$1 == "require" && $2 == "github.com/compose-spec/compose-go/v2" {print $3}' "$src/go.mod")"
[ -n "$version" ] || die "tests/support/composecheck/go.mod does not require github.com/compose-spec/compose-go/v2"
hash="$(cat "$src/go.mod" "$src/go.sum" "$src"/*.go | sha256sum | cut -c1-12)"
dest="$HVDLOG_CACHE/composecheck-$version-$hash"
if [ ! -x "$dest/composecheck" ]; then
  command -v go >/dev/null || die "composecheck needs Go 1.24+ (https://go.dev/dl/ or Debian's golang-go) to build compose-go"
  log "building composecheck (compose-go $version) from the Go module proxy (once, ~1 minute)"
  mkdir -p "$dest.partial"
  ( cd "$src" && go build -mod=readonly -o "$dest.partial/composecheck" . >&2 ) \
    || { rm -rf "$dest.partial"; die "could not build tests/support/composecheck: is the Go module proxy reachable?"; }
  rm -rf "$dest" && mv "$dest.partial" "$dest"
fi
echo "$dest/composecheck"
