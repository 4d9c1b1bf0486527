// When a case has been timed enough: a stopping rule says how many repetitions it wants in all,
// given the times of those done (nvbench's stopping criteria, reduced to what dlbench needs). The
// engine (engine.h) times one more repetition of every case that wants one, round after round.
#pragma once
#include <memory>
#include <vector>

namespace dlb::bench {
class Case;
}

namespace dlb::harness {

struct TimingPolicy;

class StoppingRule {
 public:
  virtual ~StoppingRule() = default;
  // Repetitions wanted in all, given the seconds per iteration of the repetitions done so far.
  virtual int wanted(const std::vector<double>& times) const = 0;
};

// The rule for case `c` under `policy`: the case's own repetitions when they are not the harness's to
// multiply (CaseRepetitions), else the noisy retry when the policy allows it (NoisyRetry), else a
// fixed count (FixedRepetitions). The count: --repetitions, else the case's own, else the default.
std::unique_ptr<StoppingRule> stopping_rule(const TimingPolicy& policy, const bench::Case& c);

}  // namespace dlb::harness
