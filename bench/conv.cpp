// Suite "conv": placeholder until its issue lands; it expands to no cases.
#include "bench/case.h"

namespace dlb::bench {

Suite conv_suite() {
  Suite s;
  s.name = "conv";
  s.description = "Conv2d forward / backward-data / backward-filter (arrives with issue 3)";
  s.expand = [](const SuiteOptions&) { return std::vector<CaseSpec>{}; };
  return s;
}

}  // namespace dlb::bench
