// Stopping rule: the case's own repetitions, never multiplied by the harness (an external peer's
// epochs: as many as asked, whatever their spread; Case::fixed_repetitions()).
#pragma once
#include "harness/run/stopping.h"

namespace dlb::harness {

class CaseRepetitions final : public StoppingRule {
 public:
  explicit CaseRepetitions(int n) : n_(n) {}
  int wanted(const std::vector<double>&) const override { return n_; }

 private:
  int n_;
};

}  // namespace dlb::harness
