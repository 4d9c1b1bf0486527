// Suite "lecture": placeholder until its issue lands; it expands to no cases.
#include "bench/case.h"

namespace dlb::bench {

Suite lecture_suite() {
  Suite s;
  s.name = "lecture";
  s.description = "The lecture: Net(hidden_num_chans=128) training throughput on CIFAR-10-shaped data (arrives with issue 5)";
  s.expand = [](const SuiteOptions&) { return std::vector<CaseSpec>{}; };
  return s;
}

}  // namespace dlb::bench
