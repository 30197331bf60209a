#!/usr/bin/env bash
# Distributed training with torchrun, on one or several nodes.
#   bash tools/dist_train.sh CONFIG GPUS [train.py options]
# GPUS processes on this node, one per GPU (without one: gloo on the CPUs).
# Several nodes: NNODES, NODE_RANK, MASTER_ADDR and PORT on each, e.g.
#   NNODES=2 NODE_RANK=0 MASTER_ADDR=10.0.0.1 bash tools/dist_train.sh CONFIG 8
# PYTHON: tools/find_python.sh. Docs: docs/distributed.md.
set -euo pipefail
source "$(dirname "$0")/find_python.sh"
[ $# -ge 2 ] || usage "CONFIG GPUS [train.py options]"
torchrun_tool "$2" train.py "$1" --launcher pytorch "${@:3}"
