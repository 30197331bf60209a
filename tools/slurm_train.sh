#!/usr/bin/env bash
# Training on a Slurm cluster, one task per GPU.
#   GPUS=16 bash tools/slurm_train.sh PARTITION JOB_NAME CONFIG WORK_DIR [train.py options]
# GPUS (8): tasks in all; GPUS_PER_NODE (8): tasks and GPUs a node;
# CPUS_PER_TASK (5); SRUN_ARGS: more srun options, e.g. "--quotatype=auto".
# PYTHON: the interpreter (tools/find_python.sh). Docs: docs/distributed.md.
set -euo pipefail
source "$(dirname "$0")/find_python.sh"
[ $# -ge 4 ] || usage "PARTITION JOB_NAME CONFIG WORK_DIR [train.py options]"
srun_tool "$1" "$2" train.py "$3" --work-dir="$4" --launcher=slurm "${@:5}"
