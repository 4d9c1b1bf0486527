// Which stopping rule a case gets (see stopping.h).
#include "harness/run/stopping.h"

#include "bench/case.h"
#include "harness/run/constants.h"
#include "harness/run/engine.h"
#include "harness/run/stop_case_own.h"
#include "harness/run/stop_fixed.h"
#include "harness/run/stop_noisy.h"

namespace dlb::harness {

std::unique_ptr<StoppingRule> stopping_rule(const TimingPolicy& policy, const bench::Case& c) {
  const int n = !policy.repetitions_given && c.repetitions() > 0 ? c.repetitions() : policy.repetitions;
  if (c.fixed_repetitions()) return std::make_unique<CaseRepetitions>(n);
  if (policy.retry_noisy && n > 1 && n < timing::kMaxRepetitions)
    return std::make_unique<NoisyRetry>(n, policy.max_cv, timing::kMaxRepetitions);
  return std::make_unique<FixedRepetitions>(n);
}

}  // namespace dlb::harness
