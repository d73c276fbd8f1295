#!/usr/bin/env bash
# Records the committed native captures under tests/shipping/captures/ from real MPI
# `horovodrun -np 2` runs of rank_job.py (the MPI stall inspector is slow to record, ~30 s
# a run, so the tests replay these files; the Gloo run is recorded live by the tests).
# Lines are kept as Horovod and Python wrote them, except that this machine's venv and
# checkout paths in traceback frames become /opt/venv and /src.
# Usage: tests/shipping/record.sh   (with the project's venv on PATH)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="$(python -c 'import sys; print(sys.prefix)')"
out="$here/captures"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mpi=(--mpi --mpi-args="--allow-run-as-root --oversubscribe")
record() {  # record JOB ENV...
  local job="$1"; shift
  env HVDLOG_ROOT="$work" HVDLOG_JOB="$job" "$@" timeout 120 \
    horovodrun -np 2 "${mpi[@]}" python "$here/rank_job.py" >"$work/$job.console" 2>&1 || true
  rm -rf "${out:?}/$job"
  mkdir -p "$out/$job"
  cp -r "$work/$job"/* "$out/$job/"
  find "$out/$job" -type f -exec sed -i -e "s#$venv#/opt/venv#g" -e "s#$repo#/src#g" {} +
  echo "recorded $job" >&2
}
record mpi-stall HOROVOD_STALL_CHECK_TIME_SECONDS=1 JOB_LATE_SECONDS=4
record mpi-stall-shutdown HOROVOD_STALL_CHECK_TIME_SECONDS=1 HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=2 JOB_LATE_SECONDS=6
