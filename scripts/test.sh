#!/usr/bin/env bash
# The README's test command: set everything up (idempotent), then run the whole suite.
# Extra arguments go to pytest (e.g. `make test ARGS="-k grep"`).
set -euo pipefail
cd "$(dirname "$0")/.."
# An assignment keeps bootstrap's exit status, so `set -e` stops here when it fails.
environment="$(bash scripts/bootstrap.sh test)"
eval "$environment"
log() { printf '\033[1m==>\033[0m %s\n' "$*" >&2; }
log "running the test suite"
exec python -m pytest "$@"
