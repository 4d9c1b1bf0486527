#!/usr/bin/env bash
# tests/dist_slurm.sh CLI OUT: suite dist under Slurm on this machine. Starts its own munged (own
# socket), slurmctld and slurmd (own config, ports, state and logs under OUT; no systemd), waits for the
# node to be idle, then: an sbatch job whose `srun --mpi=pmix` runs the dist suite on 2 tasks; a direct
# `srun --mpi=pmix -n 3`; and `srun --mpi=none -n 2`, which starts 2 processes without MPI and must be
# refused (exit 2). Every step is bounded by `timeout`; the trap stops the daemons it started (by pid).
# Exit 77 (skipped) when not root or Slurm/munge are missing.
set -uo pipefail
cli=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" = 0 ] || { echo "SKIPPED: not root: cannot start munged/slurmd"; exit 77; }
for t in munged slurmctld slurmd srun sbatch sinfo; do
  command -v $t >/dev/null || [ -x /usr/sbin/$t ] || { echo "SKIPPED: $t missing (ci/bootstrap.sh test installs slurm-wlm, munge)"; exit 77; }
done
[ -r /etc/munge/munge.key ] || { echo "SKIPPED: no /etc/munge/munge.key"; exit 77; }
export PATH=$PATH:/usr/sbin
rm -rf "$out" && mkdir -p "$out"/state "$out"/spool && chmod 755 "$out"
host=$(hostname -s)
port=$((20000 + $$ % 20000))
pids=()
cleanup() {
  # End this cluster's jobs first (their slurmstepd outlive a killed slurmd), then the daemons.
  if [ -n "${SLURM_CONF:-}" ]; then
    timeout 10 scancel --full --user=root 2>/dev/null
    timeout 15 bash -c 'while [ -n "$(squeue -h 2>/dev/null)" ]; do sleep 1; done'
  fi
  for f in "$out"/slurmd.pid "$out"/slurmctld.pid "$out"/munged.pid; do
    [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null
  done
  sleep 1
  for f in "$out"/slurmd.pid "$out"/slurmctld.pid "$out"/munged.pid; do
    [ -s "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
  done
}
trap cleanup EXIT INT TERM
fail() { echo "FAIL: $*"; for l in "$out"/*.log; do echo "--- $l"; tail -15 "$l"; done; exit 1; }

timeout 20 munged --force --socket="$out/munge.sock" --pid-file="$out/munged.pid" --log-file="$out/munged.log" \
  --seed-file="$out/munged.seed" || fail "munged did not start"
cat >"$out/slurm.conf" <<CONF
ClusterName=dlbtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$out/munge.sock
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
StateSaveLocation=$out/state
SlurmdSpoolDir=$out/spool
SlurmctldPidFile=$out/slurmctld.pid
SlurmdPidFile=$out/slurmd.pid
SlurmctldLogFile=$out/slurmctld.log
SlurmdLogFile=$out/slurmd.log
NodeName=$host NodeAddr=127.0.0.1 CPUs=4
PartitionName=debug Nodes=ALL Default=YES MaxTime=10 State=UP
CONF
export SLURM_CONF=$out/slurm.conf
timeout 30 slurmctld -f "$SLURM_CONF" || fail "slurmctld did not start"
timeout 30 slurmd -f "$SLURM_CONF" || fail "slurmd did not start"
# An srun sent before the node is idle can hang forever: wait for idle first.
timeout 60 bash -c 'until [ "$(sinfo -h -o %T 2>/dev/null)" = idle ]; do sleep 1; done' || fail "the node never became idle: $(sinfo 2>&1)"
echo "== slurm up: $(sinfo -h -o '%N %T %c')"

cat >"$out/job.sh" <<JOB
#!/bin/bash
#SBATCH --ntasks=2
#SBATCH --time=5
#SBATCH --output=$out/job.log
srun --mpi=pmix $cli run --suite dist --quick --no-report --sizes 12,4100 --out $out/batch
JOB
timeout 300 sbatch --wait "$out/job.sh" >"$out/sbatch.log" 2>&1 || fail "sbatch job failed (exit $?)"
python3 "$here/dist_check.py" "$out/batch" --ranks 2 --collectives || fail "batch results"
grep -q '"launcher": "srun"' "$out/batch/results.json" || fail "launcher srun not in the context"

timeout 300 srun --mpi=pmix -n 3 "$cli" run --suite dist --quick --no-report --filter 'ddp_step/cpu/fp32/model=mlp' --out "$out/srun3" >"$out/srun3.log" 2>&1 ||
  fail "srun -n 3 failed (exit $?)"
python3 "$here/dist_check.py" "$out/srun3" --ranks 3 --ddp || fail "srun -n 3 results"

timeout 120 srun --mpi=none -n 2 "$cli" run --suite dist --quick --no-report --out "$out/nompi" >"$out/nompi.log" 2>&1
rc=$?
[ $rc = 2 ] || fail "srun --mpi=none -n 2: exit $rc, expected 2"
grep -q "started without MPI" "$out/nompi.log" || fail "srun --mpi=none: no clear error"
# The recipes' rank mapping (ci/slurm/rank_env.sh): torchrun's variables from Slurm's.
timeout 60 srun --mpi=none -n 2 "$here/../ci/slurm/rank_env.sh" sh -c 'echo "$RANK $LOCAL_RANK $WORLD_SIZE $MASTER_ADDR"' \
  2>"$out/rank_env.err" | sort >"$out/rank_env.log"
printf '0 0 2 %s\n1 1 2 %s\n' "$host" "$host" | diff - "$out/rank_env.log" >/dev/null || fail "rank_env.sh: $(cat "$out/rank_env.log")"
echo "ok"
