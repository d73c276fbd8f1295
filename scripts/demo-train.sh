#!/usr/bin/env bash
# The demo's two real trainings (2 ranks, Gloo, CPU) into ROOT: `demo-stall` (rank 1 slow,
# then hung 8 s at step 6) and `demo-crash` (rank 1 raises at step 4). Used by
# scripts/demo.sh and by the docs test (tests/test_docs.py), so the examples in the docs
# are checked against the very logs a newcomer gets. Needs the venv on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
root="${1:?usage: demo-train.sh ROOT}"
quiet="${2:-}"
say() { [ -n "$quiet" ] || printf '\n\033[1m==> %s\033[0m\n' "$*" >&2; }

say "training: horovodrun -np 2 --gloo with a Horovod timeline, rank 1 is a straggler and hangs 8 s at step 6"
# Quiet: the training's output goes nowhere. Otherwise it inherits this script's stdout (never
# `>/dev/stdout`, which reopens the file and truncates a redirected `make demo > f`).
trained() { if [ -n "$quiet" ]; then "$@" >/dev/null 2>&1; else "$@" 2>&1; fi; }
# HVDLOG_TIMELINE=1: Horovod records its timeline into the job's folder (`hvdlog timeline`).
HVDLOG_TIMELINE=1 HOROVOD_LOG_LEVEL=debug trained horovodrun -np 2 -H localhost:2 --gloo \
  python training/train.py --log-root "$root" --job demo-stall --epochs 2 --steps-per-epoch 10 \
    --straggler-rank 1 --straggler-delay 0.2 --hang-rank 1 --hang-at-step 6 --hang-seconds 8 --stall-after 3

say "training again: rank 1 raises at step 4 (the job fails, as it should)"
horovodrun -np 2 -H localhost:2 --gloo \
  python training/train.py --log-root "$root" --job demo-crash --epochs 1 --steps-per-epoch 8 \
    --crash-rank 1 --crash-at-step 4 >/dev/null 2>&1 || true
