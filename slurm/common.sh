# Sourced by the sbatch scripts in this folder: maps the usual short overrides onto ampt's
# settings, and runs ampt once per Slurm task with preemption and requeue wired up.
#   PRECISION=bf16 BATCH_SIZE=512 sbatch slurm/train-node.sbatch --model gpt2-124m
# Every AMPT_* variable passes through unchanged (sbatch and srun export the environment); the
# short names below become the AMPT_* variable of the same setting. AMPT_EXE names the binary
# (default build/ampt, relative to the directory the job was submitted from).

declare -A ampt_short_names=(
  [PRECISION]=AMPT_MIXED_PRECISION [BATCH_SIZE]=AMPT_BATCH_SIZE [GRAD_ACCUM]=AMPT_GRAD_ACCUM_STEPS
  [MODEL]=AMPT_MODEL [DATASET]=AMPT_DATASET [MAX_STEPS]=AMPT_MAX_STEPS [EPOCHS]=AMPT_EPOCHS
  [LR]=AMPT_LR [CONFIG]=AMPT_CONFIG [SEED]=AMPT_SEED [DIST_BACKEND]=AMPT_DIST_BACKEND
)
for short in "${!ampt_short_names[@]}"; do
  if [ -n "${!short:-}" ]; then export "${ampt_short_names[$short]}=${!short}"; fi
done

ampt_exe="${AMPT_EXE:-build/ampt}"
unset AMPT_EXE  # not an ampt setting: ampt rejects unknown AMPT_* variables

# Runs one ampt per task of the job (srun starts SLURM_NTASKS of them; ampt reads its rank, the
# master host and port from Slurm's variables). A requeued job keeps its job id, so it finds its
# own checkpoints under runs/slurm-<job id> and resumes; a later flag wins over an earlier one,
# so the caller's own --output_dir or --resume still take effect. On exit status 75 (stopped by
# the preemption signal after saving) the job requeues itself.
ampt_srun() {
  local status=0
  srun --kill-on-bad-exit=1 "$ampt_exe" train --output_dir "runs/slurm-${SLURM_JOB_ID:-local}" \
    --resume auto --preempt_signal SIGUSR1 "$@" || status=$?
  if [ "$status" -eq 75 ] && [ -n "${SLURM_JOB_ID:-}" ]; then
    echo "ampt saved a checkpoint after a preemption signal: requeueing job $SLURM_JOB_ID"
    scontrol requeue "$SLURM_JOB_ID"
  fi
  return "$status"
}
