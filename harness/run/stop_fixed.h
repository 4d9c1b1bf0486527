// Stopping rule: a fixed number of repetitions (--repetitions, the default 5, or --quick's).
#pragma once
#include "harness/run/stopping.h"

namespace dlb::harness {

class FixedRepetitions final : public StoppingRule {
 public:
  explicit FixedRepetitions(int n) : n_(n) {}
  int wanted(const std::vector<double>&) const override { return n_; }

 private:
  int n_;
};

}  // namespace dlb::harness
