// Ours against a peer, round by round (see paired.h).
#include "bench/paired.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>
#include <vector>

#include "bench/suite.h"

namespace dlb::bench {

namespace {

bool repetition(const json& e) { return e.value("run_type", "") == "iteration"; }

std::string fmt(double v, const char* f) {
  char b[32];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

}  // namespace

void derive_paired_speedup(std::vector<json>& entries, const std::function<std::string(const json&)>& point,
                           const std::string& ours, const std::string& peer, const std::string& rate,
                           const std::string& key) {
  auto rated = [&](const json& e, const std::string& impl) {
    return !e.value("error_occurred", false) && e.value("impl", "") == impl && e.contains(rate) && e.at(rate).get<double>() > 0 &&
           !point(e).empty();
  };
  std::map<std::string, double> peer_median;               // point -> the summary's rate
  std::map<std::pair<std::string, int>, double> peer_rep;  // (point, repetition) -> rate
  for (const json& e : entries) {
    if (!rated(e, peer)) continue;
    if (summary_entry(e)) peer_median[point(e)] = e.at(rate).get<double>();
    if (repetition(e)) peer_rep[{point(e), e.value("repetition_index", 0)}] = e.at(rate).get<double>();
  }
  std::map<std::string, std::vector<double>> ratios;  // ours' case (its run_name) -> its paired repetitions' ratios
  for (json& e : entries) {
    if (!rated(e, ours) || !repetition(e)) continue;
    const auto it = peer_rep.find({point(e), e.value("repetition_index", 0)});
    if (it == peer_rep.end()) continue;
    const double x = e.at(rate).get<double>() / it->second;
    e[key] = x;
    ratios[e.value("run_name", "")].push_back(x);
  }
  for (json& e : entries) {
    if (!rated(e, ours) || !summary_entry(e)) continue;
    const auto it = peer_median.find(point(e));
    if (it == peer_median.end()) continue;
    const auto r = ratios.find(e.value("run_name", ""));
    if (r == ratios.end()) {  // no repetition of the peer's to pair with: the medians' ratio
      e[key] = e.at(rate).get<double>() / it->second;
      continue;
    }
    std::vector<double> x = r->second;
    std::sort(x.begin(), x.end());
    const std::size_t n = x.size();
    e[key] = n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
    e[key + "_range"] = {x.front(), x.back()};
  }
}

std::string paired_speedup_cell(const json& r, const std::string& key) {
  if (!r.contains(key)) return "-";
  std::string s = fmt(r.at(key).get<double>(), "%.2fx");
  if (const auto it = r.find(key + "_range"); it != r.end() && it->size() == 2)
    s += " (" + fmt(it->at(0).get<double>(), "%.2f") + "-" + fmt(it->at(1).get<double>(), "%.2f") + ")";
  return s;
}

}  // namespace dlb::bench
