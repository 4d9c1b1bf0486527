// What a run prints: a line per case as it finishes (with an ETA), and the tables at the end (a
// generic one per suite, then the suite's own summary).
#pragma once
#include <chrono>
#include <cstddef>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dlb::bench {
struct Suite;
}

namespace dlb::harness {

// A record's headline throughput as text, "812.3 GFLOP/s", "1.2 GB/s", "3915 images/s"; "" when none.
std::string throughput_text(const nlohmann::json& record);

class Progress {
 public:
  Progress(std::size_t total, std::size_t kept);  // planned cases, and those a resumed run keeps
  // "[ 3/51] " for the case at plan index i.
  std::string prefix(std::size_t i) const;
  // The case's outcome (ok with time and throughput, FAILED, SKIPPED), the ETA when `eta`, and its
  // profile table when it has one.
  void finished(const nlohmann::json& record, bool eta);

 private:
  std::size_t total_, kept_, done_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// The tables after a run: per suite in `order`, the generic table of its records, then its summary.
void print_tables(std::ostream& out, const std::vector<const bench::Suite*>& order,
                  const std::vector<std::vector<nlohmann::json>>& records);

}  // namespace dlb::harness
