#!/usr/bin/env bash
# Distributed training with torchrun, on one or several nodes.
#   bash tools/dist_train.sh CONFIG GPUS [train.py options]
# Several nodes: set NNODES, NODE_RANK, MASTER_ADDR and PORT on each, e.g.
#   NNODES=2 NODE_RANK=0 MASTER_ADDR=10.0.0.1 bash tools/dist_train.sh CONFIG 8
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
PYTHON=${PYTHON:-python}
TOOLS=$(dirname "$0")

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
