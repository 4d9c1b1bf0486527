#!/usr/bin/env bash
# tests/dist_netns.sh CLI OUT: suite dist across two emulated hosts on this machine. Two network
# namespaces (each with its own hostname via unshare --uts) joined by veth pairs to a bridge in a third
# namespace; mpirun, started on the first host, reaches the second through a launch agent (this
# script's agent.sh) instead of ssh. Runs the collectives and the DDP step across the hosts, then caps
# both bridge ports at 1 Gbit/s (tc tbf) and checks the large all-reduce's busbw lies in [0.6, 1.0] of
# the cap. Creates and removes its own namespaces, bridge and /etc/netns entries (trap), uses only the
# 10.77.X.0/24 addresses it creates. Exit 77 (skipped) when namespaces cannot be made (not root).
set -uo pipefail
cli=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" = 0 ] || { echo "SKIPPED: not root: network namespaces cannot be made"; exit 77; }
for t in ip tc unshare mpirun; do command -v $t >/dev/null || { echo "FAIL: $t missing (ci/bootstrap.sh test installs iproute2)"; exit 1; }; done
rm -rf "$out" && mkdir -p "$out"
id=$$
br=dlbbr$id h0=dlbh0x$id h1=dlbh1x$id
net=10.77.$((id % 200 + 20))
cleanup() {
  for ns in $h0 $h1 $br; do ip netns del $ns 2>/dev/null; done
  rm -rf /etc/netns/$h0 /etc/netns/$h1
}
trap cleanup EXIT INT TERM
step() { "$@" || { echo "FAIL: setup step: $*"; exit 1; }; }
if ! ip netns add $br 2>"$out/netns.err"; then echo "SKIPPED: cannot make network namespaces: $(cat "$out/netns.err")"; exit 77; fi
step ip netns add $h0
step ip netns add $h1
step ip -n $br link add br0 type bridge
step ip -n $br link set br0 up
i=0
for h in $h0 $h1; do
  step ip link add vb$i$id netns $br type veth peer name eth0 netns $h
  step ip -n $br link set vb$i$id master br0 up
  step ip -n $h addr add $net.1$i/24 dev eth0
  step ip -n $h link set eth0 up
  step ip -n $h link set lo up
  mkdir -p /etc/netns/$h
  printf '127.0.0.1 localhost\n%s.10 %s\n%s.11 %s\n' $net $h0 $net $h1 >/etc/netns/$h/hosts
  i=$((i + 1))
done
cat >"$out/agent.sh" <<AGENT
#!/bin/sh
# mpirun's launch agent (in place of ssh): run the daemon's command inside the host's namespaces.
host=\$1; shift
exec ip netns exec "\$host" unshare --uts sh -c "hostname \$host; \$*"
AGENT
chmod +x "$out/agent.sh"
printf '%s slots=1\n%s slots=1\n' $h0 $h1 >"$out/hosts"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 DLB_CPU_THREADS=1
# Two TCP links per peer and yielding waits: with one socket and spinning ranks, Open MPI reached only
# ~0.45 of the capped link on this loaded 2-core machine (plain TCP through the same link: 0.94); so, ~0.8.
mpi="mpirun -n 2 --hostfile $out/hosts --map-by node --bind-to none --mca plm_rsh_agent $out/agent.sh --mca btl self,tcp
 --mca btl_tcp_if_include $net.0/24 --mca oob_tcp_if_include $net.0/24 --mca btl_tcp_links 2 --mca mpi_yield_when_idle 1"
mpi=${mpi//$'\n'/}
on_h0() { timeout "$1" ip netns exec $h0 unshare --uts sh -c "hostname $h0; cd '$out'; $2"; }

echo "== collectives and the DDP step across $h0 and $h1"
on_h0 300 "$mpi $cli run --suite dist --quick --no-report --sizes 12,4100,1MiB --out $out/across" >"$out/across.log" 2>&1 ||
  { echo "FAIL: exit $?"; tail -30 "$out/across.log"; exit 1; }
python3 "$here/dist_check.py" "$out/across" --ranks 2 --hosts 2 --collectives || exit 1
on_h0 300 "$mpi $cli run --suite dist --quick --no-report --filter ddp_step/cpu/fp32/model=mlp --out $out/ddp" >"$out/ddp.log" 2>&1 ||
  { echo "FAIL: exit $?"; tail -30 "$out/ddp.log"; exit 1; }
python3 "$here/dist_check.py" "$out/ddp" --ranks 2 --hosts 2 --ddp || exit 1

echo "== both bridge ports capped at 1 Gbit/s"
for p in vb0$id vb1$id; do step ip netns exec $br tc qdisc add dev $p root tbf rate 1gbit burst 256kb latency 50ms; done
export DLB_LINK_CAP="1gbit (tc tbf on both bridge ports)"
on_h0 300 "$mpi -x DLB_LINK_CAP $cli run --suite dist --quick --no-report --sizes 16MiB --repetitions 5 --filter 'all_reduce/.*inplace=0' --out $out/capped" >"$out/capped.log" 2>&1 ||
  { echo "FAIL: exit $?"; tail -30 "$out/capped.log"; exit 1; }
python3 "$here/dist_check.py" "$out/capped" --ranks 2 --hosts 2 --cap-gbit 1 || exit 1
grep -q '"link_cap"' "$out/capped/results.json" || { echo "FAIL: link cap not in the context"; exit 1; }
echo "ok"
