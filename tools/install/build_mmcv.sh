#!/usr/bin/env bash
# Build (once per machine) and install mmcv 2.1.0 with its compiled ops.
#
# mmcv 2.1.0 has no wheel for torch 2.14 on the registry, so it is compiled from
# the sdist: with its CUDA ops when torch sees a GPU and an nvcc of torch's
# CUDA major version is found ($CUDA_HOME/bin/nvcc, else nvcc on the PATH),
# with CPU ops only otherwise -- and then, on a GPU machine, with a warning
# saying what to do (mmdet's FocalLoss calls mmcv's compiled
# sigmoid_focal_loss for CUDA tensors). The wheel is cached outside the clone,
# keyed by mmcv, torch and Python versions and the build (cpu or cu<version>),
# so a fresh clone (CI) reuses it instead of compiling again; a CPU wheel
# cached under the older key without the build is still used.
#
# usage: tools/install/build_mmcv.sh [--plan] PYTHON
#   --plan: print the build it would do and its cache dir; build nothing.
#   FORCE_CUDA=0 (mmcv's own variable) builds the CPU ops whatever is found.
set -euo pipefail

PLAN=0
if [ "${1:-}" = --plan ]; then PLAN=1; shift; fi
PY=${1:?usage: build_mmcv.sh [--plan] PYTHON}
# Absolute path: the build runs from another directory.
PY=$(command -v "$PY" || true)
PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")
MMCV_VERSION=2.1.0
# torch's version, the Python tag, torch's CUDA (none), a GPU seen (1/0) and
# the installed mmcv's build (cpu, cu<version>, or - for none or another).
facts=$("$PY" -c "
import sys, torch
try:
    import mmcv, mmcv.ops
    v = mmcv.ops.get_compiling_cuda_version()
    built = ('-' if mmcv.__version__ != '$MMCV_VERSION' else
             'cpu' if v == 'not available' else 'cu' + v.replace('.', ''))
except Exception:
    built = '-'
print(torch.__version__.split('+')[0], 'cp%d%d' % sys.version_info[:2],
      torch.version.cuda or 'none', int(torch.cuda.is_available()), built)
")
read -r TORCH_VERSION PY_TAG TORCH_CUDA GPU INSTALLED <<<"$facts"

say() { echo "[mmcv] $*"; }

# The build: cu<nvcc's version> with a GPU and an nvcc of torch's CUDA major.
BUILD=cpu
if [ "$GPU" = 1 ] && [ "$TORCH_CUDA" != none ] && [ "${FORCE_CUDA:-}" != 0 ]; then
    NVCC=${CUDA_HOME:+$CUDA_HOME/bin/nvcc}
    [ -x "${NVCC:-}" ] || NVCC=$(command -v nvcc || true)
    NVCC_CUDA=$([ -n "$NVCC" ] && "$NVCC" --version |
        sed -n 's/.*release \([0-9][0-9.]*\),.*/\1/p' || true)
    if [ -n "$NVCC_CUDA" ] && [ "${NVCC_CUDA%%.*}" = "${TORCH_CUDA%%.*}" ]; then
        BUILD=cu${NVCC_CUDA//./}
    else
        found=${NVCC_CUDA:+ ($NVCC is CUDA $NVCC_CUDA, another major version)}
        say "warning: torch sees a GPU, but no nvcc of CUDA $TORCH_CUDA (torch's" \
            "CUDA) was found in \$CUDA_HOME/bin or on the PATH$found:" \
            "building mmcv with CPU ops only."
        say "  Without CUDA ops, training RetinaNet on the GPU stops at mmcv's" \
            "sigmoid_focal_loss (mmcpvt's CudaOpsHook refuses such a run before" \
            "its first iteration); classifiers and Semantic FPN are not affected."
        say "  Either install the nvcc of CUDA $TORCH_CUDA (the CUDA toolkit, or" \
            "pip's nvidia-cuda-nvcc), set CUDA_HOME to it and run" \
            "$0 $PY (make install does not, once it has run);"
        say "  or use OpenMMLab's prebuilt mmcv: a torch it publishes mmcv 2.1.0" \
            "wheels for (torch 2.1 with CUDA 11.8 or 12.1, Python <= 3.11), then" \
            "'pip install -U openmim && mim install mmcv==2.1.0'" \
            "(https://mmcv.readthedocs.io/en/2.x/get_started/installation.html)."
    fi
fi

CACHE_ROOT=${MMCPVT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mmcpvt}
KEY="mmcv-${MMCV_VERSION}_torch-${TORCH_VERSION}_${PY_TAG}"
CACHE_DIR="$CACHE_ROOT/${KEY}_$BUILD"
wheel=$(ls "$CACHE_DIR"/mmcv-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ] && [ "$BUILD" = cpu ]; then  # the key before it named the build
    wheel=$(ls "$CACHE_ROOT/$KEY"/mmcv-*.whl 2>/dev/null | head -n 1 || true)
    [ -z "$wheel" ] || CACHE_DIR="$CACHE_ROOT/$KEY"
fi

if [ "$PLAN" = 1 ]; then
    printf 'build: %s\ncache: %s\ncached wheel: %s\ninstalled: %s\n' \
        "$BUILD" "$CACHE_DIR" "${wheel:-none}" "$INSTALLED"
    exit 0
fi

# A CUDA build (also one installed by mim) has the CPU ops too: keep it.
if [ "$INSTALLED" = "$BUILD" ] || [ "${INSTALLED#cu}" != "$INSTALLED" ]; then
    say "mmcv $MMCV_VERSION with ops ($INSTALLED) already installed"
    exit 0
fi

if [ -z "$wheel" ]; then
    say "no cached wheel in $CACHE_DIR"
    force_cuda=0
    if [ "$BUILD" != cpu ]; then
        force_cuda=1
        export CUDA_HOME=$(dirname "$(dirname "$NVCC")")
        say "CUDA ops for this machine's GPU: nvcc $NVCC_CUDA, CUDA_HOME=$CUDA_HOME"
    fi
    say "compiling mmcv $MMCV_VERSION with $BUILD ops from source, once per" \
        "machine: about 25 minutes on 2 cores with CPU ops, several times as" \
        "long with CUDA ops (MAX_JOBS sets the parallel jobs)"
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
    ( cd "$build" && MMCV_WITH_OPS=1 FORCE_CUDA=$force_cuda \
        MAX_JOBS=${MAX_JOBS:-$(nproc)} \
        "$PY" -m pip wheel --no-deps --no-build-isolation -w "$build/dist" "./mmcv-$MMCV_VERSION" ) \
        > "$build/build.log" 2>&1 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        sleep 60
        kill -0 "$pid" 2>/dev/null && say "still compiling... $(( ($(date +%s) - start) / 60 )) min elapsed"
    done
    if ! wait "$pid"; then
        say "compile FAILED; last lines of $build/build.log:" >&2
        tail -n 40 "$build/build.log" >&2
        [ "$BUILD" = cpu ] || say "FORCE_CUDA=0 $0 $PY builds the CPU ops only" >&2
        exit 1
    fi
    # Move into the cache atomically so a concurrent reader never sees half a wheel.
    built=$(ls "$build"/dist/mmcv-*.whl)
    cp "$built" "$CACHE_DIR/.tmp.whl" && mv "$CACHE_DIR/.tmp.whl" "$CACHE_DIR/$(basename "$built")"
    rm -rf "$build"
    wheel=$(ls "$CACHE_DIR"/mmcv-*.whl | head -n 1)
    say "compiled in $(( ($(date +%s) - start) / 60 )) min; cached at $wheel"
else
    say "using cached wheel $wheel"
fi
"$PY" -m pip install --quiet --no-deps --force-reinstall "$wheel"
