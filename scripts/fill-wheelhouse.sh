#!/usr/bin/env bash
# The dependencies of hvdlog[cli] as wheels in $HVDLOG_CACHE/wheelhouse-<python>, for
# tests/test_wheel.py, which installs our wheel into a fresh venv with no network and no
# checkout. The list comes from the wheel's own metadata; refreshed when pyproject.toml changes.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

house="$HVDLOG_CACHE/wheelhouse-$PY_TAG"
stamp="$house/.pyproject-$(sha256sum "$REPO_ROOT/pyproject.toml" | cut -c1-16)"
[ -f "$stamp" ] && exit 0
log "filling the wheelhouse for the wheel test ($house)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
cp -r "$REPO_ROOT/hvdlog" "$REPO_ROOT/pyproject.toml" "$REPO_ROOT/README.md" "$work/src/"
"$VENV/bin/pip" wheel -q --no-deps --no-build-isolation -w "$work/dist" "$work/src" || die "could not build the hvdlog wheel"
wheel="$(ls "$work"/dist/hvdlog-*.whl)"
rm -rf "$house" && mkdir -p "$house"
"$VENV/bin/pip" download -q -d "$house" "$wheel[cli]" || die "pip could not download hvdlog[cli]'s dependencies"
rm -f "$house"/hvdlog-*.whl
touch "$stamp"
