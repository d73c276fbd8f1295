#!/usr/bin/env bash
# Idempotent bootstrap of what `make demo` or `make test` needs, outside the clone.
#   bootstrap.sh demo: a venv with PyTorch, a Horovod built here (Gloo + MPI), Open MPI, and
#                      hvdlog[cli] from this checkout: all the demo runs.
#   bootstrap.sh check: the demo's venv plus hvdlog[test] (pytest, pytest-xdist, ruff, mypy): what `make check` runs.
#   bootstrap.sh test: the same, plus the test tools: Elasticsearch 8.19 and 9.x (9.x on a
#                      JDK 21+), JRuby and a JDK, the mustache linter, the compose-spec checker, a real Filebeat, hvdlog[test]
#                      (pytest, ruff, mypy) and a wheelhouse for the wheel test.
# Prints `export` lines for the caller to eval. A second run takes seconds.
# (The compose stack's one-off `setup` service is something else: see docs/deploy.md.)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

mode="${1:-test}"
case "$mode" in demo|check|test) ;; *) die "usage: bootstrap.sh demo|check|test (got '$mode')" ;; esac

ensure_debs openmpi-bin libopenmpi-dev cmake util-linux

# A venv cannot be moved (its scripts name its path), so it is built in place and marked
# ready only when torch is in: an interrupted first run starts over instead of half-working.
if [ ! -f "$VENV/.hvdlog-ready" ]; then
  log "creating the venv $VENV"
  rm -rf "$VENV"
  "$PYTHON_BIN" -m venv "$VENV" || die "could not create a venv with $PYTHON_BIN"
  # PyPI's Linux torch wheel pulls CUDA runtime wheels (about 5 GB installed); no CPU-only
  # wheel is served by the registries this project can use.
  log "installing torch $TORCH_VERSION from PyPI (about 1-2 minutes, once)"
  "$VENV/bin/pip" install -q "torch==$TORCH_VERSION" numpy || die "pip could not install torch $TORCH_VERSION"
  touch "$VENV/.hvdlog-ready"
fi

# A stable name for a new shell: `source $HVDLOG_CACHE/venv/bin/activate` puts hvdlog on PATH
# (the demo's last line says so). Only a link is replaced, never a venv someone put there.
if [ "$VENV" != "$HVDLOG_CACHE/venv" ] && { [ -L "$HVDLOG_CACHE/venv" ] || [ ! -e "$HVDLOG_CACHE/venv" ]; }; then
  ln -sfn "$VENV" "$HVDLOG_CACHE/venv"
fi

bash "$REPO_ROOT/scripts/build-horovod.sh"

# Our package, editable, so the console script runs this checkout's code. pip takes half a
# minute even when nothing changed, so it runs only when this checkout, the extra or the
# declared dependencies differ from the last install into this venv.
extra="cli"; [ "$mode" != demo ] && extra="test"
installed="$REPO_ROOT [$extra] $(sha256sum "$REPO_ROOT/pyproject.toml" | cut -d' ' -f1)"
if [ "$(cat "$VENV/.hvdlog-editable" 2>/dev/null)" != "$installed" ]; then
  "$VENV/bin/pip" install -q -e "$REPO_ROOT[$extra]" || die "pip could not install hvdlog[$extra]"
  printf '%s' "$installed" > "$VENV/.hvdlog-editable"
fi

cat <<ENV
export PATH="$VENV/bin:\$PATH"
export VIRTUAL_ENV="$VENV"
# The venv is shared by every clone; this checkout's code comes first whatever the
# editable install last pointed at (two clones testing at once stay independent).
export PYTHONPATH="$REPO_ROOT\${PYTHONPATH:+:\$PYTHONPATH}"
export HVDLOG_CACHE="$HVDLOG_CACHE"
ENV
[ "$mode" != test ] && exit 0

es_home="$(bash "$REPO_ROOT/scripts/fetch-elasticsearch.sh")"
es9_home="$(bash "$REPO_ROOT/scripts/fetch-elasticsearch.sh" "$ELASTICSEARCH9_VERSION")"
es9_java="$(bash "$REPO_ROOT/scripts/find-jdk21.sh")"
bash "$REPO_ROOT/scripts/install-mustache.sh"
bash "$REPO_ROOT/scripts/install-jdk.sh"
bash "$REPO_ROOT/scripts/install-jruby.sh"
composecheck="$(bash "$REPO_ROOT/scripts/install-composecheck.sh")"
filebeat="$(bash "$REPO_ROOT/scripts/install-filebeat.sh")"
bash "$REPO_ROOT/scripts/fill-wheelhouse.sh"

cat <<ENV
export HVDLOG_ES_HOME="$es_home"
export HVDLOG_ES9_HOME="$es9_home"
export HVDLOG_ES9_JAVA_HOME="$es9_java"
export HVDLOG_MUSTACHE="$HVDLOG_CACHE/mustache-$MUSTACHE_VERSION/mustache"
export HVDLOG_JRUBY="$HVDLOG_CACHE/jruby-$JRUBY_VERSION/jruby-complete.jar"
export HVDLOG_COMPOSECHECK="$composecheck"
export HVDLOG_FILEBEAT="$filebeat"
ENV
