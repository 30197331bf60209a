#!/usr/bin/env bash
# The wheels that tools/analysis_tools/train_step.py needs on a machine
# with torch and timm but no OpenMMLab package and no network (the lent GPU
# machines): mmengine, mmcv 2.1.0 without ops (mmcv-lite: pure Python, built
# here from the sdist with MMCV_WITH_OPS=0 in seconds), mmcpvt itself, and the
# pure-Python packages of theirs that such a machine lacks (addict, termcolor,
# yapf, platformdirs). numpy, pyyaml, rich, matplotlib, opencv, packaging and
# Pillow are there; mmpretrain, mmdet and mmseg are not needed. About 2 MiB.
#
# usage: tools/install/gpu_wheels.sh [PYTHON_VERSION [DIR]]
#   PYTHON_VERSION: the target's Python (default 3.12); DIR default .whl
#   (ignored by git: `echo /.whl/ >> .git/info/exclude`).
set -euo pipefail
case "${1:-}" in  # the header above, not a download
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "usage: $0 [PYTHON_VERSION [DIR]] (--help: what it does)" >&2
        exit 2 ;;
esac

PYV=${1:-3.12}
DIR=${2:-.whl}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PY:-$ROOT/.venv/bin/python}  # a Python with pip, setuptools and torch
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)

# the tested versions (requirements/constraints.txt, the CPU install)
"$PY" -m pip download --quiet --no-deps --only-binary=:all: \
    --python-version "$PYV" --implementation cp --platform any -d "$DIR" \
    mmengine==0.10.7 addict==2.4.0 termcolor==3.3.0 yapf==0.43.0 \
    platformdirs==4.14.8

build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
"$PY" -m pip download --quiet --no-deps --no-binary :all: --no-build-isolation \
    -d "$build" mmcv==2.1.0
tar -xzf "$build/mmcv-2.1.0.tar.gz" -C "$build"
( cd "$build" && MMCV_WITH_OPS=0 "$PY" -m pip wheel --quiet --no-deps \
    --no-build-isolation -w "$DIR" ./mmcv-2.1.0 ) >"$build/log" 2>&1 ||
    { tail -n 30 "$build/log" >&2; exit 1; }
ls -l "$DIR"
du -sh "$DIR"
