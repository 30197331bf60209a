#!/usr/bin/env bash
# Testing a checkpoint on a Slurm cluster, one task per GPU.
#   GPUS=16 bash tools/slurm_test.sh PARTITION JOB_NAME CONFIG CHECKPOINT [test.py options]
# GPUS (8): tasks in all; GPUS_PER_NODE (8): tasks and GPUs a node;
# CPUS_PER_TASK (5); SRUN_ARGS: more srun options, e.g. "--quotatype=auto".
# PYTHON: the interpreter (tools/find_python.sh). Docs: docs/distributed.md.
set -euo pipefail
source "$(dirname "$0")/find_python.sh"
[ $# -ge 4 ] || usage "PARTITION JOB_NAME CONFIG CHECKPOINT [test.py options]"
srun_tool "$1" "$2" test.py "$3" "$4" --launcher=slurm "${@:5}"
