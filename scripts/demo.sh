#!/usr/bin/env bash
# The README's demo command: set everything up (idempotent), run a real 2-rank
# `horovodrun` training on the CPU with hvdlog, then look at its per-rank logs with hvdlog.
set -euo pipefail
cd "$(dirname "$0")/.."
# An assignment keeps bootstrap's exit status, so `set -e` stops here when it fails.
environment="$(bash scripts/bootstrap.sh demo)"
eval "$environment"
log() { printf '\n\033[1m==> %s\033[0m\n' "$*" >&2; }
show() { printf '\033[2m$ %s\033[0m\n' "$*" >&2; "$@" || true; }

root="demo-logs"
rm -rf "$root"
bash scripts/demo-train.sh "$root"

log "what landed on disk: one JSON file and two native captures per rank"
show find "$root" -type f

log "rank 1's warnings and errors, both jobs"
show hvdlog grep --rank 1 --level warning --no-color "$root"

log "stall episodes (our watchdog; Horovod's inspector never fires under Gloo)"
show hvdlog stalls "$root/demo-stall"

log "who is behind"
show hvdlog stragglers "$root/demo-stall"

log "who made the collectives wait (from Horovod's timeline)"
show hvdlog timeline --top 3 "$root/demo-stall"

log "which rank failed first, and who died as collateral"
show hvdlog first-failure "$root/demo-crash"

log "every job under the root, then one job on one screen (the 3 a.m. command)"
show hvdlog jobs "$root"
show hvdlog report "$root/demo-crash"

log "done: the files are in $root/"
# The venv is on PATH only inside this script: say how to get the command in a new shell.
venv="$HVDLOG_CACHE/venv"
[ "$(readlink -f "$venv")" = "$(readlink -f "$VIRTUAL_ENV")" ] || venv="$VIRTUAL_ENV"
printf 'hvdlog in a new shell:  source %q/bin/activate   # then: hvdlog report %s/demo-crash\n' "$venv" "$root"
