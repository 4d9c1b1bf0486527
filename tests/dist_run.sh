#!/usr/bin/env bash
# tests/dist_run.sh MODE CLI OUT [N]: suite dist with real MPI ranks on this machine (bounded by timeouts).
#   collectives N  every collective, out of place and in place, odd sizes and sizes not divisible by N: 0 wrong
#   ddp N          the data-parallel step's variants: verified (bit-identical ranks, parity with one rank)
#   direct         started by `mpirun -n 2` itself, no --out: rank 0 writes the one results folder
#   rank_dies      a rank killed mid-run: exit 1 with a clear error, no hang
#   mismatch       mpirun -n 2 with --ranks 3: exit 2, one line
#   no_mpi         2 ranks announced but MPI sees a world of 1 (started without MPI): exit 2
#                  (srun --mpi=none -n 2 is tests/dist_slurm.sh's)
set -uo pipefail
mode=$1 cli=$2 out=$3 n=${4:-2}
here=$(cd "$(dirname "$0")" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
rm -rf "$out" && mkdir -p "$out"
log=$out/log
fail() { echo "FAIL: $*"; tail -25 "$log"; exit 1; }
case $mode in
  collectives)
    timeout 300 "$cli" run --suite dist --ranks "$n" --quick --no-report --sizes 4,12,28,4100,65540 --out "$out/r" >"$log" 2>&1 || fail "exit $?"
    python3 "$here/dist_check.py" "$out/r" --ranks "$n" --collectives ;;
  ddp)
    timeout 300 "$cli" run --suite dist --ranks "$n" --quick --no-report --filter ddp_step --out "$out/r" >"$log" 2>&1 || fail "exit $?"
    python3 "$here/dist_check.py" "$out/r" --ranks "$n" --ddp ;;
  direct)
    cd "$out" && timeout 300 mpirun -n 2 --bind-to none "$cli" run --suite dist --quick --no-report --sizes 4100 >"$log" 2>&1 || fail "exit $?"
    dirs=$(ls results | wc -l)
    [ "$dirs" = 1 ] || fail "$dirs results folders, expected the one of rank 0"
    python3 "$here/dist_check.py" results/* --ranks 2 --collectives ;;
  rank_dies)
    DLB_DIST_TEST_KILL_RANK=1 timeout 120 "$cli" run --suite dist --ranks 2 --quick --no-report --sizes 4100 --out "$out/r" >"$log" 2>"$out/err"
    rc=$?; cat "$out/err" >>"$log"
    [ $rc = 1 ] || fail "exit $rc, expected 1"
    grep -q "ended abnormally" "$out/err" || fail "no clear error on stderr"
    echo "ok: $(grep 'dlbench: error' "$out/err")" ;;
  mismatch)
    timeout 120 mpirun -n 2 --bind-to none "$cli" run --suite dist --ranks 3 --quick --no-report --out "$out/r" >"$log" 2>"$out/err"
    rc=$?; cat "$out/err" >>"$log"
    [ $rc = 2 ] || fail "exit $rc, expected 2"
    [ "$(grep -c 'dlbench: error' "$out/err")" = 1 ] || fail "expected one error line"
    echo "ok: $(grep 'dlbench: error' "$out/err")" ;;
  no_mpi)
    # A launcher that says 2 ranks (what mpirun tells each rank) while MPI, not started by it, sees 1.
    DLB_DIST_RANKS=2 timeout 120 "$cli" run --suite dist --quick --no-report --out "$out/r" >"$log" 2>"$out/err"
    rc=$?; cat "$out/err" >>"$log"
    [ $rc = 2 ] || fail "exit $rc, expected 2"
    grep -q "started without MPI" "$out/err" || fail "no clear error"
    [ ! -e "$out/r" ] || fail "a results folder was written"
    echo "ok: $(grep 'dlbench: error' "$out/err")" ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac
