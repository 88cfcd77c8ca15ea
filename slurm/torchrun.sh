#!/bin/bash
# ampt under torchrun instead of srun: torchrun starts the ranks and sets RANK, WORLD_SIZE,
# LOCAL_RANK, MASTER_ADDR and MASTER_PORT, which ampt reads (they win over Slurm's variables).
#   slurm/torchrun.sh 8 --mixed_precision bf16            # 8 ranks on this machine
#   srun --nodes=2 --ntasks-per-node=1 slurm/torchrun.sh 8  # inside an allocation: 2 x 8 ranks
set -euo pipefail
gpus="${1:?usage: slurm/torchrun.sh GPUS_PER_NODE [ampt train flags...]}"
shift
exe="${AMPT_EXE:-build/ampt}"
unset AMPT_EXE  # not an ampt setting: ampt rejects unknown AMPT_* variables
if [ -n "${SLURM_JOB_NODELIST:-}" ]; then
  head_node="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"
  exec torchrun --nnodes="${SLURM_NNODES:-1}" --nproc_per_node="$gpus" \
    --rdzv_id="${SLURM_JOB_ID}" --rdzv_backend=c10d --rdzv_endpoint="${head_node}:29500" \
    --no-python "$exe" train "$@"
fi
exec torchrun --standalone --nproc_per_node="$gpus" --no-python "$exe" train "$@"
