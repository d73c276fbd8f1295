#!/usr/bin/env bash
# Builds Horovod from the PyPI sdist (Gloo + MPI, PyTorch only) into a cached wheel and
# installs it into the venv. Horovod 0.28.1 is the latest release and needs C++17 to
# compile against current PyTorch (upstream PR #3998, unreleased), so we patch two lines.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

py="$VENV/bin/python"
if "$py" -c 'import horovod.torch' 2>/dev/null; then exit 0; fi

torch_version="$("$py" -c 'import torch; print(torch.__version__)')"
wheel_dir="$HVDLOG_CACHE/wheels/horovod-$HOROVOD_VERSION-torch$torch_version-$PY_TAG"
wheel="$(ls "$wheel_dir"/horovod-*.whl 2>/dev/null | head -n1 || true)"

if [ -z "$wheel" ]; then
  log "building Horovod $HOROVOD_VERSION against torch $torch_version (about 5 minutes on 2 cores)"
  ensure_debs cmake openmpi-bin libopenmpi-dev
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  "$VENV/bin/pip" download -q --no-deps --no-binary :all: "horovod==$HOROVOD_VERSION" -d "$work" \
    || die "could not download the horovod $HOROVOD_VERSION sdist from PyPI"
  tar -xzf "$work/horovod-$HOROVOD_VERSION.tar.gz" -C "$work"
  src="$work/horovod-$HOROVOD_VERSION"
  # The core needs C++17; the torch module needs whatever torch's headers demand
  # (torch >= 2.10 headers `#error` below C++20).
  torch_std=17
  grep -q 'C++20 or later' "$("$py" -c 'import torch, os; print(os.path.dirname(torch.__file__))')/include/ATen/ATen.h" \
    && torch_std=20
  sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' "$src/CMakeLists.txt"
  sed -i "s/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD $torch_std)/" "$src/horovod/torch/CMakeLists.txt"
  grep -q 'CMAKE_CXX_STANDARD 14' "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt" \
    && die "C++ standard patch did not apply to the horovod sources"
  sublog "C++17 for the core, C++$torch_std for the torch module"
  "$VENV/bin/pip" install -q cloudpickle psutil pyyaml packaging cffi
  mkdir -p "$wheel_dir"
  # Debian's cmake: pip's cmake 4.x rejects gloo's old cmake_minimum_required.
  ( cd "$src" && PATH="/usr/bin:$PATH" HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 \
      HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS="-j$(nproc)" \
      "$VENV/bin/pip" wheel --no-deps --no-build-isolation -w "$wheel_dir" . >"$wheel_dir.build.log" 2>&1 ) \
    || { tail -n 40 "$wheel_dir.build.log" >&2; rm -rf "$wheel_dir"; die "horovod build failed (log: $wheel_dir.build.log)"; }
  wheel="$(ls "$wheel_dir"/horovod-*.whl | head -n1)"
  sublog "cached $wheel"
fi
"$VENV/bin/pip" install -q "$wheel"
"$py" -c 'import horovod.torch as hvd; assert hvd.gloo_built() and hvd.mpi_built()' \
  || die "installed horovod lacks Gloo or MPI support"
