#!/usr/bin/env bash
# Build (once per machine) and install mmcv 2.1.0 with its compiled CPU ops.
#
# mmcv 2.1.0 has no wheel for torch 2.14 on the registry, so it is compiled from
# the sdist. The wheel is cached outside the clone, keyed by mmcv, torch and
# Python versions, so a fresh clone (CI) reuses it instead of compiling again.
#
# usage: tools/install/build_mmcv.sh PYTHON
set -euo pipefail

PY=${1:?usage: build_mmcv.sh PYTHON}
# Absolute path: the build runs from another directory.
PY=$(command -v "$PY" || true)
PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")
MMCV_VERSION=2.1.0
TORCH_VERSION=$("$PY" -c 'import torch; print(torch.__version__.split("+")[0])')
PY_TAG=$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
CACHE_ROOT=${MMCPVT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mmcpvt}
CACHE_DIR="$CACHE_ROOT/mmcv-${MMCV_VERSION}_torch-${TORCH_VERSION}_${PY_TAG}"

if "$PY" -c "import mmcv, mmcv.ops; assert mmcv.__version__ == '$MMCV_VERSION'" 2>/dev/null; then
    echo "[mmcv] mmcv $MMCV_VERSION with ops already installed"
    exit 0
fi

wheel=$(ls "$CACHE_DIR"/mmcv-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
    echo "[mmcv] no cached wheel in $CACHE_DIR"
    echo "[mmcv] compiling mmcv $MMCV_VERSION with CPU ops from source:"
    echo "[mmcv]   this happens once per machine and takes about 25 minutes on 2 cores"
    start=$(date +%s)
    build=$(mktemp -d)
    # The build imports torch and pkg_resources (gone in setuptools 81).
    "$PY" -m pip install --quiet 'setuptools>=77.0.3,<81' wheel ninja numpy
    "$PY" -m pip download --quiet --no-deps --no-binary :all: --no-build-isolation \
        -d "$build" "mmcv==$MMCV_VERSION"
    tar -xzf "$build"/mmcv-"$MMCV_VERSION".tar.gz -C "$build"
    # torch >= 2.10 headers require C++20; mmcv 2.1.0 hard-codes -std=c++17.
    sed -i 's/-std=c++17/-std=c++20/g' "$build/mmcv-$MMCV_VERSION/setup.py"
    mkdir -p "$CACHE_DIR"
    ( cd "$build" && MMCV_WITH_OPS=1 FORCE_CUDA=0 MAX_JOBS=${MAX_JOBS:-2} \
        "$PY" -m pip wheel --no-deps --no-build-isolation -w "$build/dist" "./mmcv-$MMCV_VERSION" ) \
        > "$build/build.log" 2>&1 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        sleep 60
        kill -0 "$pid" 2>/dev/null && echo "[mmcv] still compiling... $(( ($(date +%s) - start) / 60 )) min elapsed"
    done
    if ! wait "$pid"; then
        echo "[mmcv] compile FAILED; last lines of $build/build.log:" >&2
        tail -n 40 "$build/build.log" >&2
        exit 1
    fi
    # Move into the cache atomically so a concurrent reader never sees half a wheel.
    built=$(ls "$build"/dist/mmcv-*.whl)
    cp "$built" "$CACHE_DIR/.tmp.whl" && mv "$CACHE_DIR/.tmp.whl" "$CACHE_DIR/$(basename "$built")"
    rm -rf "$build"
    wheel=$(ls "$CACHE_DIR"/mmcv-*.whl | head -n 1)
    echo "[mmcv] compiled in $(( ($(date +%s) - start) / 60 )) min; cached at $wheel"
else
    echo "[mmcv] using cached wheel $wheel"
fi
"$PY" -m pip install --quiet --no-deps "$wheel"
