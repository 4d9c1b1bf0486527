// Stopping rule: n repetitions; when their coefficient of variation exceeds max_cv, as many again
// (2n, at most `cap`). The first n decide, once: the extra ones are not judged again.
#pragma once
#include "harness/run/stopping.h"

namespace dlb::harness {

class NoisyRetry final : public StoppingRule {
 public:
  NoisyRetry(int n, double max_cv, int cap) : n_(n), max_cv_(max_cv), cap_(cap) {}
  int wanted(const std::vector<double>& times) const override;

 private:
  int n_;
  double max_cv_;
  int cap_;
};

// Sample standard deviation over mean of `times` (0 for fewer than two or a zero mean).
double coefficient_of_variation(const std::vector<double>& times);

}  // namespace dlb::harness
