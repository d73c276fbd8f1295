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
log "training: horovodrun -np 2 --gloo, rank 1 is a straggler and hangs 8 s at step 6"
HOROVOD_LOG_LEVEL=debug horovodrun -np 2 -H localhost:2 --gloo \
  python training/train.py --log-root "$root" --job demo-stall --epochs 2 --steps-per-epoch 10 \
    --straggler-rank 1 --straggler-delay 0.05 --hang-rank 1 --hang-at-step 6 --hang-seconds 8 --stall-after 3

log "training again: rank 1 raises at step 4 (the job fails, as it should)"
horovodrun -np 2 -H localhost:2 --gloo \
  python training/train.py --log-root "$root" --job demo-crash --epochs 1 --steps-per-epoch 8 \
    --crash-rank 1 --crash-at-step 4 >/dev/null 2>&1 || true

log "what landed on disk: one JSON file and two native captures per rank"
show find "$root" -type f

log "rank 1's warnings and errors, both jobs"
show hvdlog grep --rank 1 --level warning --no-color "$root"

log "stall episodes (our watchdog; Horovod's inspector never fires under Gloo)"
show hvdlog stalls "$root/demo-stall"

log "who is behind"
show hvdlog stragglers "$root/demo-stall"

log "which rank failed first, and who died as collateral"
show hvdlog first-failure "$root/demo-crash"

log "done: the files are in $root/; try: hvdlog grep --help"
