# What the launch scripts (dist_*.sh, slurm_*.sh) share, sourced by them.
# PYTHON: an interpreter that has torch (checked without importing it): $PYTHON
# when set (never replaced), else `python` on PATH (the activated env), else
# .venv/bin/python of this repository (`make install` creates it).

# fail STATUS MESSAGE...: exit STATUS with the script's name and MESSAGE.
fail() {
    echo "$(basename "$0"):" "${@:2}" >&2
    exit "$1"
}

_has_torch() {
    "$1" -c 'import importlib.util, sys
sys.exit(importlib.util.find_spec("torch") is None)' >/dev/null 2>&1
}

_VENV_PYTHON=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.venv/bin/python
if [ -n "${PYTHON:-}" ]; then
    _has_torch "$PYTHON" || fail 1 "PYTHON=$PYTHON cannot import torch (or" \
        "does not run); set PYTHON to the python of the environment with" \
        "torch and mmengine, or unset it"
elif _has_torch python; then
    PYTHON=python
elif _has_torch "$_VENV_PYTHON"; then
    PYTHON=$_VENV_PYTHON
else
    fail 1 "no python with torch: \`python\` on PATH" \
        "($(command -v python || echo 'none')) cannot import it, and" \
        "$_VENV_PYTHON does not exist or cannot import it either;" \
        "activate the environment (source .venv/bin/activate) or set" \
        "PYTHON=/path/to/python"
fi
TOOLS=$(dirname "$0")

usage() {
    echo "usage: $0 $1" >&2
    exit 2
}

# torchrun_tool GPUS TOOL ARGS: tools/TOOL in GPUS processes on this node
# (NNODES, NODE_RANK, MASTER_ADDR and PORT: several nodes).
torchrun_tool() {
    local n
    for n in "GPUS=$1" "NNODES=${NNODES:-1}"; do
        [[ ${n#*=} =~ ^[1-9][0-9]*$ ]] || fail 2 "$n: the number of" \
            "processes must be a positive integer (1 or more), e.g. 1 for" \
            "one process"
    done
    # (torchrun waits forever for a node rank that cannot join)
    [[ ${NODE_RANK:-0} =~ ^[0-9]+$ ]] && ((${NODE_RANK:-0} < ${NNODES:-1})) ||
        fail 2 "NODE_RANK=${NODE_RANK:-0}: the rank of this node must be" \
            "0 to $((${NNODES:-1} - 1)) (NNODES=${NNODES:-1} nodes)"
    PYTHONPATH="$TOOLS/..":${PYTHONPATH:-} \
    "$PYTHON" -m torch.distributed.run \
        --nnodes="${NNODES:-1}" \
        --node_rank="${NODE_RANK:-0}" \
        --master_addr="${MASTER_ADDR:-127.0.0.1}" \
        --master_port="${PORT:-29500}" \
        --nproc_per_node="$1" \
        "$TOOLS/$2" "${@:3}"
}

# srun_tool PARTITION JOB_NAME TOOL ARGS: tools/TOOL in GPUS (8) Slurm tasks,
# GPUS_PER_NODE (8) a node, CPUS_PER_TASK (5) CPUs each; SRUN_ARGS: more
# srun options, e.g. "--quotatype=auto".
srun_tool() {
    set -x
    # SRUN_ARGS is split on purpose: it holds several srun options.
    # shellcheck disable=SC2086
    PYTHONPATH="$TOOLS/..":${PYTHONPATH:-} \
    srun -p "$1" \
        --job-name="$2" \
        --gres=gpu:"${GPUS_PER_NODE:-8}" \
        --ntasks="${GPUS:-8}" \
        --ntasks-per-node="${GPUS_PER_NODE:-8}" \
        --cpus-per-task="${CPUS_PER_TASK:-5}" \
        --kill-on-bad-exit=1 \
        ${SRUN_ARGS:-} \
        "$PYTHON" -u "$TOOLS/$3" "${@:4}"
}
