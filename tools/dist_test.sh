#!/usr/bin/env bash
# Distributed testing with torchrun, on one or several nodes.
#   bash tools/dist_test.sh CONFIG CHECKPOINT GPUS [test.py options]
# GPUS is the number of processes on this node, one per GPU. Without a GPU
# they run on the CPUs with the gloo backend (mmcpvt/apis/cpu_dist.py).
# Several nodes: set NNODES, NODE_RANK, MASTER_ADDR and PORT on each.
# PYTHON: the interpreter (tools/find_python.sh). Docs: docs/distributed.md.
set -euo pipefail
source "$(dirname "$0")/find_python.sh"
[ $# -ge 3 ] || usage "CONFIG CHECKPOINT GPUS [test.py options]"
torchrun_tool "$3" test.py "$1" "$2" --launcher pytorch "${@:4}"
