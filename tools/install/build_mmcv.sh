#!/usr/bin/env bash
# Build (once per machine) and install mmcv 2.1.0 with its compiled ops: it
# has no wheel for torch 2.14, so it is compiled from the sdist.
#
# The build is cu<nvcc's version> (CUDA ops, which include the CPU ops) when
# an nvcc of torch's CUDA major is found ($CUDA_HOME/bin/nvcc, else nvcc on
# the PATH, else pip's beside torch's nvidia wheels) and torch sees a GPU or
# FORCE_CUDA=1 is set (a login node); otherwise cpu. FORCE_CUDA=0 builds the
# CPU ops whatever is found. A GPU machine that gets CPU ops is warned
# (mmdet's FocalLoss calls mmcv's compiled sigmoid_focal_loss on CUDA).
# Architectures: the GPU's own, else TORCH_CUDA_ARCH_LIST, else DEFAULT_ARCHS.
# The headers of the CUDA libraries come from torch's nvidia wheels
# (site-packages/nvidia/*/include, added to CPATH) where nvcc alone lacks them.
#
# The wheel is cached outside the clone, keyed by the mmcv, torch and Python
# versions and the build (cpu, or cu<version>_sm<archs>), so a fresh clone
# (CI) reuses it; a CPU wheel cached under the older key without the build is
# still used.
#
# usage: tools/install/build_mmcv.sh [--plan] PYTHON
#   --plan: print the build, its architectures, CPATH additions and cache
#   dir; build nothing.
set -euo pipefail

PLAN=0
case "${1:-}" in
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --plan) PLAN=1; shift ;;
esac
PY=${1:?usage: build_mmcv.sh [--plan] PYTHON}
# Absolute path: the build runs from another directory.
FOUND=$(command -v "$PY" || true)
if [ -z "$FOUND" ] || [ -d "$FOUND" ]; then
    echo "[mmcv] $PY: no such Python interpreter; give one, e.g." \
        ".venv/bin/python" >&2
    exit 2
fi
PY=$(cd "$(dirname "$FOUND")" && pwd)/$(basename "$FOUND")
MMCV_VERSION=2.1.0
# A100, RTX 30, RTX 40/L4/L40, H100/H200, B200, RTX 50 (+PTX, which newer
# GPUs compile at load time); CUDA 13 compiles nothing older than 7.5.
DEFAULT_ARCHS="8.0;8.6;8.9;9.0;10.0;12.0+PTX"
# torch's version, the Python tag, torch's CUDA (none), a GPU seen (1/0), its
# architecture (-), the installed mmcv's build (cpu, cu<torch's CUDA>, or - for
# none or another) and the include folders of torch's nvidia wheel packages
# (-). The build is read off the compiled ops' file (a CUDA build links the
# CUDA runtime), not asked of mmcv: its get_compiling_cuda_version() ended
# the process with a segmentation fault in the one build tried on a GPU
# machine (docs/get_started.md).
facts=$("$PY" -c "
import glob, importlib.util, os, sys
try:
    import torch
except ImportError:
    sys.exit('[mmcv] $PY has no torch: mmcv compiles against torch; install '
             'it first (pip install -r requirements/torch.txt)')
try:
    import mmcv
    with open(importlib.util.find_spec('mmcv._ext').origin, 'rb') as f:
        cuda = b'libcudart' in f.read()
    built = ('-' if mmcv.__version__ != '$MMCV_VERSION' else 'cu' +
             torch.version.cuda.replace('.', '') if cuda else 'cpu')
except Exception:
    built = '-'
gpu = torch.cuda.is_available()
arch = '%d.%d' % torch.cuda.get_device_capability() if gpu else '-'
site = os.path.dirname(os.path.dirname(torch.__file__))
inc = sorted(glob.glob(os.path.join(site, 'nvidia', '*', 'include')))
print(torch.__version__.split('+')[0], 'cp%d%d' % sys.version_info[:2],
      torch.version.cuda or 'none', int(gpu), arch, built, ':'.join(inc) or '-')
")
read -r TORCH_VERSION PY_TAG TORCH_CUDA GPU GPU_ARCH INSTALLED NV_INCLUDE <<<"$facts"

say() { echo "[mmcv] $*"; }

# The build: cu<nvcc's version> with a GPU (or FORCE_CUDA=1) and an nvcc of
# torch's CUDA major.
BUILD=cpu
ARCHS=
WANT_CUDA=0
if [ "$TORCH_CUDA" != none ] && [ "${FORCE_CUDA:-}" != 0 ] &&
   { [ "$GPU" = 1 ] || [ "${FORCE_CUDA:-}" = 1 ]; }; then
    WANT_CUDA=1
fi
if [ "${FORCE_CUDA:-}" = 1 ] && [ "$TORCH_CUDA" = none ]; then
    say "FORCE_CUDA=1, but this torch is a CPU build: mmcv's CUDA ops need a" \
        "CUDA torch (requirements/torch.txt); unset FORCE_CUDA or install one" >&2
    exit 2
fi
if [ "$WANT_CUDA" = 1 ]; then
    NVCC=${CUDA_HOME:+$CUDA_HOME/bin/nvcc}
    [ -x "${NVCC:-}" ] || NVCC=$(command -v nvcc || true)
    # else pip's nvcc (nvidia-cuda-nvcc, -crt and nvvm of torch's CUDA), which
    # lands beside the headers of torch's nvidia wheels (nvidia/cu13/bin)
    for inc in ${NV_INCLUDE//:/ }; do
        [ -x "${NVCC:-}" ] || NVCC=$(ls "${inc%/include}/bin/nvcc" 2>/dev/null || true)
    done
    # The toolkit's real folder (nvcc on the PATH may be a link or a wrapper).
    NVCC_CUDA=$([ -n "$NVCC" ] && "$NVCC" --version |
        sed -n 's/.*release \([0-9][0-9.]*\),.*/\1/p' || true)
    found=${NVCC_CUDA:+ ($NVCC is CUDA $NVCC_CUDA, another major version)}
    if [ -n "$NVCC_CUDA" ] && [ "${NVCC_CUDA%%.*}" = "${TORCH_CUDA%%.*}" ]; then
        BUILD=cu${NVCC_CUDA//./}
        if [ "$GPU" = 1 ]; then ARCHS=$GPU_ARCH
        else ARCHS=${TORCH_CUDA_ARCH_LIST:-$DEFAULT_ARCHS}; fi
    elif [ "${FORCE_CUDA:-}" = 1 ]; then
        say "FORCE_CUDA=1, but no nvcc of CUDA $TORCH_CUDA (torch's CUDA) was" \
            "found in \$CUDA_HOME/bin or on the PATH$found: install it (the CUDA" \
            "toolkit, or pip's nvidia-cuda-nvcc) and set CUDA_HOME to it" >&2
        exit 2
    else
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
# The cache key's architectures: "8.0;9.0+PTX" -> sm80-90+PTX.
BUILD_KEY=$BUILD
[ -z "$ARCHS" ] || BUILD_KEY="${BUILD}_sm$(echo "$ARCHS" | tr -d '.' | tr ' ;,' '---')"
CUDA_CPATH=
[ "$BUILD" = cpu ] || [ "$NV_INCLUDE" = - ] || CUDA_CPATH=$NV_INCLUDE

CACHE_ROOT=${MMCPVT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mmcpvt}
KEY="mmcv-${MMCV_VERSION}_torch-${TORCH_VERSION}_${PY_TAG}"
CACHE_DIR="$CACHE_ROOT/${KEY}_$BUILD_KEY"
wheel=$(ls "$CACHE_DIR"/mmcv-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ] && [ "$BUILD" = cpu ]; then  # the key before it named the build
    wheel=$(ls "$CACHE_ROOT/$KEY"/mmcv-*.whl 2>/dev/null | head -n 1 || true)
    [ -z "$wheel" ] || CACHE_DIR="$CACHE_ROOT/$KEY"
fi

if [ "$PLAN" = 1 ]; then
    printf 'build: %s\n' "$BUILD"
    if [ "$BUILD" != cpu ]; then
        src="the GPU's own"
        [ "$GPU" = 1 ] || src=${TORCH_CUDA_ARCH_LIST:+TORCH_CUDA_ARCH_LIST}
        printf 'nvcc: %s (CUDA %s)\narchitectures: %s (%s)\nCPATH added: %s\n' \
            "$NVCC" "$NVCC_CUDA" "$ARCHS" "${src:-the default}" "${CUDA_CPATH:-none}"
    fi
    printf 'cache: %s\ncached wheel: %s\ninstalled: %s\n' \
        "$CACHE_DIR" "${wheel:-none}" "$INSTALLED"
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
        # The toolkit's folder as nvcc itself reports it (its TOP): nvcc on the
        # PATH may be a link or a wrapper script outside the toolkit.
        top=$("$NVCC" --dryrun -x cu -c /dev/null -o /dev/null 2>&1 |
            sed -n 's/^#\$ TOP=//p' | head -n 1)
        CUDA_HOME=${CUDA_HOME:-${top:+$(cd "$top" && pwd -P)}}
        export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$NVCC")")}
        export TORCH_CUDA_ARCH_LIST=$ARCHS
        [ -z "$CUDA_CPATH" ] || export CPATH=${CPATH:+$CPATH:}$CUDA_CPATH
        say "CUDA ops: nvcc $NVCC_CUDA, CUDA_HOME=$CUDA_HOME, architectures $ARCHS"
    fi
    say "compiling mmcv $MMCV_VERSION with $BUILD ops from source, once per" \
        "machine: 10 min on 2 cores with CPU ops (measured, README.md);" \
        "CUDA ops take longer, each architecture adding to it (MAX_JOBS" \
        "sets the parallel jobs)"
    start=$(date +%s)
    build=$(mktemp -d)
    # pip's CUDA runtime (nvidia/cu13/lib) has libcudart.so.<major> alone,
    # and the link asks for -lcudart: a link named libcudart.so, for the link
    if [ "$BUILD" != cpu ] && ! ls "$CUDA_HOME"/lib*/libcudart.so >/dev/null 2>&1; then
        rt=$(ls "$CUDA_HOME"/lib*/libcudart.so.* 2>/dev/null | head -n 1 || true)
        if [ -n "$rt" ]; then
            mkdir "$build/lib" && ln -s "$rt" "$build/lib/libcudart.so"
            export LIBRARY_PATH=$build/lib${LIBRARY_PATH:+:$LIBRARY_PATH}
        fi
    fi
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
        "$PY" -m pip wheel -v --no-deps --no-build-isolation -w "$build/dist" "./mmcv-$MMCV_VERSION" ) \
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
    cp "$build/build.log" "$CACHE_DIR/build.log"  # the compiler's output, kept
    rm -rf "$build"
    wheel=$(ls "$CACHE_DIR"/mmcv-*.whl | head -n 1)
    say "compiled in $(( ($(date +%s) - start) / 60 )) min; cached at $wheel" \
        "(the compiler's log beside it)"
else
    say "using cached wheel $wheel"
fi
"$PY" -m pip install --quiet --no-deps --force-reinstall "$wheel"
