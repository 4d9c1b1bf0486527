// Latency keys of a record from each timed call's seconds: p50_ms and p99_ms (nearest rank) and
// latency_calls, as the inference cases (seq op=infer, gpt2 op=infer) report them.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include <nlohmann/json.hpp>

namespace dlb::bench {

// The q-quantile of sorted values (nearest rank).
inline double quantile(const std::vector<double>& s, double q) {
  if (s.empty()) return 0;
  const std::size_t k = std::size_t(std::ceil(q * double(s.size())));
  return s[std::min(s.size() - 1, k > 0 ? k - 1 : 0)];
}

inline void put_latency(nlohmann::json& r, std::vector<double> seconds) {
  std::sort(seconds.begin(), seconds.end());
  for (double& v : seconds) v *= 1e3;
  r["p50_ms"] = quantile(seconds, 0.50);
  r["p99_ms"] = quantile(seconds, 0.99);
  r["latency_calls"] = seconds.size();
}

}  // namespace dlb::bench
