#!/usr/bin/env bash
# Entry point of the one-off `setup` service (python image): installs hvdlog from a copy of
# the repository mounted read-only at /src (pip would write build files into the source),
# then runs setup/provision.py with this script's arguments. Safe to re-run: every step creates or updates.
set -euo pipefail
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tar -C /src --exclude=.git --exclude='*.egg-info' -cf - . | tar -C "$work" -xf -
echo "==> installing hvdlog into the setup container" >&2
pip install --quiet --no-cache-dir --disable-pip-version-check --root-user-action=ignore "$work" >&2 \
  || { echo "xx pip could not install hvdlog: does the head node reach PyPI (or a mirror set with PIP_INDEX_URL)?" >&2; exit 2; }
exec python "$work/setup/provision.py" "$@"
