#!/usr/bin/env bash
# Training on a Slurm cluster, one task per GPU.
#   GPUS=16 bash tools/slurm_train.sh PARTITION JOB_NAME CONFIG WORK_DIR [train.py options]
# GPUS (8): tasks in all; GPUS_PER_NODE (8): tasks and GPUs a node;
# CPUS_PER_TASK (5); SRUN_ARGS: more srun options, e.g. "--quotatype=auto".
# PYTHON: the interpreter; defaults to `python` if it has torch, else the
# repository's .venv/bin/python (tools/find_python.sh).
# Docs: docs/distributed.md.
set -euo pipefail

if [ $# -lt 4 ]; then
    echo "usage: $0 PARTITION JOB_NAME CONFIG WORK_DIR [train.py options]" >&2
    exit 2
fi
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
WORK_DIR=$4
GPUS=${GPUS:-8}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
CPUS_PER_TASK=${CPUS_PER_TASK:-5}
SRUN_ARGS=${SRUN_ARGS:-""}
TOOLS=$(dirname "$0")
source "$TOOLS/find_python.sh"

set -x
# SRUN_ARGS is split on purpose: it holds several srun options.
# shellcheck disable=SC2086
PYTHONPATH="$TOOLS/..":${PYTHONPATH:-} \
srun -p "$PARTITION" \
    --job-name="$JOB_NAME" \
    --gres=gpu:"$GPUS_PER_NODE" \
    --ntasks="$GPUS" \
    --ntasks-per-node="$GPUS_PER_NODE" \
    --cpus-per-task="$CPUS_PER_TASK" \
    --kill-on-bad-exit=1 \
    $SRUN_ARGS \
    "$PYTHON" -u "$TOOLS/train.py" "$CONFIG" --work-dir="$WORK_DIR" \
    --launcher=slurm "${@:5}"
