// Suite "amp": placeholder until its issue lands; it expands to no cases.
#include "bench/case.h"

namespace dlb::bench {

Suite amp_suite() {
  Suite s;
  s.name = "amp";
  s.description = "Mixed precision training (arrives with issue 6)";
  s.expand = [](const SuiteOptions&) { return std::vector<CaseSpec>{}; };
  return s;
}

}  // namespace dlb::bench
