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

}  // namespace dlb::harness
