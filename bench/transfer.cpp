// Suite "transfer": placeholder until its issue lands; it expands to no cases.
#include "bench/case.h"

namespace dlb::bench {

Suite transfer_suite() {
  Suite s;
  s.name = "transfer";
  s.description = "Host<->device transfers, pinned vs pageable (arrives with issue 4)";
  s.expand = [](const SuiteOptions&) { return std::vector<CaseSpec>{}; };
  return s;
}

}  // namespace dlb::bench
