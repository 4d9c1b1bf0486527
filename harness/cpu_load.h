// How much of the machine other processes used while a case was timed: the part of the busy CPU
// time in /proc/stat (all CPUs) that is not this process's own (getrusage: every thread, plus waited
// children), as a fraction of wall time x online CPUs. Recorded with every timed case ("foreign_cpu")
// so that `compare` can tell a slower case from a machine that was busy with something else.
#pragma once

namespace dlb::harness {

class ForeignCpuProbe {
 public:
  ForeignCpuProbe();  // starts measuring
  // Fraction (0..1) of the machine's CPU time other processes used since construction; NaN when
  // /proc/stat is unreadable (not Linux) or too little time passed to tell (under 20 ms).
  // own_children_s: CPU seconds that children of ours, not yet waited for, used meanwhile (ours).
  double fraction(double own_children_s = 0) const;

 private:
  double busy0_ = 0, self0_ = 0, wall0_ = 0;
  bool ok_ = false;
};

// Round trip of a cache line between two cores, in ns: two threads pinned to the first two CPUs this
// process may use pass a flag back and forth (2000 times, median of 3 tries). On the 2-vCPU cloud VMs
// we run on it alternates between ~55 ns and 300-700 ns (the vCPUs placed near or far apart), and in
// the slow phases every cache line the two cores share costs several times more: any kernel split
// over threads slows down. The interleaved runner records it for each round of repetitions
// ("core_round_trip_ns"), so a repetition can be told apart by the phase it ran in. NaN with fewer
// than two CPUs or when pinning is refused.
double core_round_trip_ns();

}  // namespace dlb::harness
