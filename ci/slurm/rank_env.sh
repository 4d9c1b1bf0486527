#!/usr/bin/env bash
# ci/slurm/rank_env.sh CMD...: run CMD as one task of a Slurm step with torchrun's variables set from
# Slurm's: RANK=SLURM_PROCID, LOCAL_RANK=SLURM_LOCALID, WORLD_SIZE=SLURM_NTASKS, LOCAL_WORLD_SIZE,
# MASTER_ADDR = the job's first node, MASTER_PORT; the task's GPU is its local rank unless Slurm already
# bound one (--gpus-per-task sets CUDA_VISIBLE_DEVICES). dlbench itself takes rank and size from MPI
# (srun --mpi=pmix) and its GPU from the local rank; the variables serve PyTorch peers and scripts.
set -euo pipefail
: "${SLURM_PROCID:?run me under srun}"
export RANK=$SLURM_PROCID
export LOCAL_RANK=${SLURM_LOCALID:-0}
export WORLD_SIZE=${SLURM_NTASKS:-${SLURM_NPROCS:-1}}
export LOCAL_WORLD_SIZE=${SLURM_NTASKS_PER_NODE:-${SLURM_TASKS_PER_NODE%%(*}}
export MASTER_ADDR=${MASTER_ADDR:-$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)}
export MASTER_PORT=${MASTER_PORT:-$((29500 + ${SLURM_JOB_ID:-0} % 1000))}
exec "$@"
