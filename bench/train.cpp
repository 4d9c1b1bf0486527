// Suite "train": placeholder until its issue lands; it expands to no cases.
#include "bench/case.h"

namespace dlb::bench {

Suite train_suite() {
  Suite s;
  s.name = "train";
  s.description = "Training steps of the four seed models (arrives with issue 5)";
  s.expand = [](const SuiteOptions&) { return std::vector<CaseSpec>{}; };
  return s;
}

}  // namespace dlb::bench
