#!/usr/bin/env bash
# Records the real Horovod output under tests/corpus/ from real `horovodrun -np 2` runs.
# Usage: record.sh OUTDIR   (needs the venv with Horovod built with Gloo and MPI)
# Each run writes OUTDIR/<run>.console (horovodrun's console: stdout+stderr, tagged)
# and OUTDIR/<run>.tree/ (--output-filename). Lines are copied into cases untouched.
set -uo pipefail
out="${1:?usage: record.sh OUTDIR}"
job="$(cd "$(dirname "$0")" && pwd)/allreduce_job.py"
mkdir -p "$out"
mpi=(--mpi --mpi-args="--allow-run-as-root --oversubscribe")
run() {  # run NAME ENV... -- HOROVODRUN-ARGS...
  local name="$1"; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  rm -rf "$out/$name.tree"
  env "${envs[@]}" timeout 120 horovodrun -np 2 --output-filename "$out/$name.tree" "$@" >"$out/$name.console" 2>&1
  echo "$name: exit $?" >&2
}
run gloo-debug HOROVOD_LOG_LEVEL=debug -- --gloo python "$job"
run gloo-crash HOROVOD_LOG_LEVEL=warning CORPUS_CRASH=1 -- --gloo -prefix-timestamp python "$job"
run mpi-debug-hidetime HOROVOD_LOG_LEVEL=debug HOROVOD_LOG_HIDE_TIME=1 -- "${mpi[@]}" python "$job"
run mpi-stall HOROVOD_STALL_CHECK_TIME_SECONDS=2 CORPUS_STALL=7 -- "${mpi[@]}" python "$job"
run mpi-stall-shutdown HOROVOD_STALL_CHECK_TIME_SECONDS=2 HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=5 CORPUS_STALL=30 -- "${mpi[@]}" python "$job"
run mpi-trace HOROVOD_LOG_LEVEL=trace CORPUS_STEPS=5 -- "${mpi[@]}" python "$job"
# hvdlog's own layout: untagged per-rank captures <job>/<host>/rank-<r>.{stdout,stderr}.log
layout="$out/layout/corpus-job/node1"
mkdir -p "$layout"
HOROVOD_LOG_LEVEL=info CORPUS_CRASH=1 timeout 120 horovodrun -np 2 --gloo \
  sh -c "exec python '$job' >'$layout'/rank-\$HOROVOD_RANK.stdout.log 2>'$layout'/rank-\$HOROVOD_RANK.stderr.log" >"$out/layout.console" 2>&1
echo "layout: exit $?" >&2
