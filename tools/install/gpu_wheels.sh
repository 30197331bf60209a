#!/usr/bin/env bash
# The carried set: what a lent GPU machine (torch, timm and the packages of
# tools/install/gpu_packages.txt, no OpenMMLab package, no network) lacks to
# train our configs, gathered into one folder for tools/install/gpu_check.py:
# - wheels of mmengine, mmdet, mmsegmentation, mmpretrain (the tested
#   versions, requirements/constraints.txt) and of every package of theirs
#   that the machine's list lacks, for its Python; pip resolves the
#   dependencies for that Python and platform (manylinux up to glibc 2.28),
#   and a package on the list is left out whatever its version;
# - setuptools < 81 (mmcv 2.1.0's build imports pkg_resources), always;
# - mmcv 2.1.0's sdist (the check compiles it there with build_mmcv.sh);
# - mmcpvt's own wheel, built from this clone (tracked and untracked files
#   that git does not ignore).
# It lists what it gathered, with the total size, and fails above 60 MiB
# (a GPU machine takes 64 MiB of carried files in all). Anything else in DIR
# stays and counts: e.g. mmcv_cache/, the CUDA build of mmcv that an
# earlier gpu_check.py run left in its OUT_DIR, which the next run installs
# instead of compiling.
#
# usage: tools/install/gpu_wheels.sh [PYTHON_VERSION [DIR]]
#   PYTHON_VERSION: the target's Python (default 3.12); DIR default .whl
#   (ignored by git); the wheels and sdists in it are replaced.
set -euo pipefail
case "${1:-}" in  # the header above, not a download
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "usage: $0 [PYTHON_VERSION [DIR]] (--help: what it does)" >&2
        exit 2 ;;
esac

PYV=${1:-3.12}
DIR=${2:-.whl}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PY:-$ROOT/.venv/bin/python}  # a Python with pip >= 22.2 and setuptools
PY=$(cd "$(dirname "$(command -v "$PY")")" && pwd)/$(basename "$PY")
MAX_MIB=60
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
rm -f "$DIR"/*.whl "$DIR"/*.tar.gz  # an earlier set's
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The closure, resolved for the target and written as a report, not installed.
target=(--only-binary=:all: --python-version "$PYV" --implementation cp)
for glibc in 2_28 2_27 2_24 2_17; do  # pip takes no older tag by itself
    target+=(--platform "manylinux_${glibc}_x86_64")
done
"$PY" -m pip install --quiet --dry-run --ignore-installed "${target[@]}" \
    --target "$tmp/none" --report "$tmp/report.json" \
    -c "$ROOT/requirements/constraints.txt" mmengine mmdet mmsegmentation \
    mmpretrain -r "$ROOT/requirements/openmmlab.txt" 'setuptools<81' \
    2>"$tmp/log" || { grep -v '^WARNING: Location' "$tmp/log" >&2; exit 1; }
# The URLs of the wheels the machine lacks; the names it has, to stdout.
"$PY" - "$tmp/report.json" "$ROOT/tools/install/gpu_packages.txt" \
    >"$tmp/urls" <<'EOF'
import json, re, sys
def norm(name):
    return re.sub(r'[-_.]+', '-', name).lower()
with open(sys.argv[2]) as f:
    there = {norm(line.split('#')[0].strip()) for line in f} - {''}
# mmengine asks for opencv-python; the machine's opencv-python-headless is
# the same cv2 without GUI (70 MB less to carry)
if 'opencv-python-headless' in there:
    there.add('opencv-python')
there.discard('setuptools')  # carried whatever version is there
left = []
for item in json.load(open(sys.argv[1]))['install']:
    meta = item['metadata']
    if norm(meta['name']) in there:
        left.append(f"{meta['name']} {meta['version']}")
    else:
        print(item['download_info']['url'])
print('[carry] on the machine already (its list):', ', '.join(sorted(
    left, key=str.lower)), file=sys.stderr)
EOF
# The index's URLs: download them as pip would (its cache and settings).
xargs "$PY" -m pip download --quiet --no-deps "${target[@]}" -d "$DIR" \
    <"$tmp/urls"

"$PY" -m pip download --quiet --no-deps --no-binary :all: \
    --no-build-isolation -d "$DIR" mmcv==2.1.0

# mmcpvt from a copy of the clone: setup.py writes mmcpvt/.mim into the tree
# it builds.
mkdir "$tmp/src"
(cd "$ROOT" && git ls-files -z -co --exclude-standard |
    tar --null -T - -cf - | tar -xf - -C "$tmp/src")
(cd "$tmp/src" && "$PY" -m pip wheel --quiet --no-deps --no-build-isolation \
    -w "$DIR" .) >"$tmp/log" 2>&1 || { tail -n 30 "$tmp/log" >&2; exit 1; }

(cd "$DIR" && find . -type f -printf '%9s  %P\n' | sort -k 2)
bytes=$(find "$DIR" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
echo "[carry] $(find "$DIR" -type f | wc -l) files, $(awk "BEGIN {printf \"%.1f\", $bytes / 1048576}") MiB in $DIR (Python $PYV)"
if [ "$bytes" -gt $((MAX_MIB * 1048576)) ]; then
    echo "[carry] more than $MAX_MIB MiB: a GPU machine takes 64 MiB of carried files in all" >&2
    exit 1
fi
