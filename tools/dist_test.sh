#!/usr/bin/env bash
# Distributed testing with torchrun, on one or several nodes.
#   bash tools/dist_test.sh CONFIG CHECKPOINT GPUS [test.py options]
# GPUS processes on this node, one per GPU (without one: gloo on the CPUs).
# Several nodes: NNODES, NODE_RANK, MASTER_ADDR and PORT on each.
# PYTHON: tools/find_python.sh. Docs: docs/distributed.md.
set -euo pipefail
source "$(dirname "$0")/find_python.sh"
[ $# -ge 3 ] || usage "CONFIG CHECKPOINT GPUS [test.py options]"
torchrun_tool "$3" test.py "$1" "$2" --launcher pytorch "${@:4}"
