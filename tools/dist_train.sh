#!/usr/bin/env bash
# Distributed training with torchrun, on one or several nodes.
#   bash tools/dist_train.sh CONFIG GPUS [train.py options]
# GPUS is the number of processes on this node, one per GPU. Without a GPU
# they run on the CPUs with the gloo backend (tools/cpu_dist.py).
# Several nodes: set NNODES, NODE_RANK, MASTER_ADDR and PORT on each, e.g.
#   NNODES=2 NODE_RANK=0 MASTER_ADDR=10.0.0.1 bash tools/dist_train.sh CONFIG 8
# PYTHON: the interpreter; defaults to `python` if it has torch, else the
# repository's .venv/bin/python (tools/find_python.sh).
# Docs: docs/distributed.md.
set -euo pipefail

if [ $# -lt 2 ]; then
    echo "usage: $0 CONFIG GPUS [train.py options]" >&2
    exit 2
fi
CONFIG=$1
GPUS=$2
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
TOOLS=$(dirname "$0")
source "$TOOLS/find_python.sh"
check_count GPUS "$GPUS"
check_count NNODES "$NNODES"

PYTHONPATH="$TOOLS/..":${PYTHONPATH:-} \
"$PYTHON" -m torch.distributed.run \
    --nnodes="$NNODES" \
    --node_rank="$NODE_RANK" \
    --master_addr="$MASTER_ADDR" \
    --master_port="$PORT" \
    --nproc_per_node="$GPUS" \
    "$TOOLS/train.py" \
    "$CONFIG" \
    --launcher pytorch "${@:3}"
