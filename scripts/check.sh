#!/usr/bin/env bash
# `make check`: the fast tier, for every edit. The tests that need only the venv: none that
# starts Elasticsearch, runs horovodrun, a JVM or a tool the bootstrap builds (pyproject.toml's
# markers). Those tools are hidden too, so a test that reaches one without its marker fails
# and names the marker. `make test` runs everything, as CI does.
set -euo pipefail
cd "$(dirname "$0")/.."
environment="$(bash scripts/bootstrap.sh check)"
eval "$environment"
unset HVDLOG_ES_HOME HVDLOG_ES9_HOME HVDLOG_ES9_JAVA_HOME HVDLOG_JRUBY HVDLOG_FILEBEAT HVDLOG_MUSTACHE HVDLOG_COMPOSECHECK
export HVDLOG_TIER=check
printf '\033[1m==>\033[0m %s\n' "running the fast tier (make test runs everything)" >&2
# Two workers (pytest-xdist): most of the tier's time is tests waiting on a subprocess, a socket or a
# poll, not CPU. worksteal keeps both busy to the end; `make check ARGS="-n 0"` runs serially.
exec python -m pytest -m "not (elasticsearch or horovod or jvm or tools)" -n 2 --dist worksteal "$@"
