// The list of suites. A new suite is one bench/<name>.cpp defining `Suite <name>_suite()` and one
// line below.
#include <stdexcept>

#include "bench/case.h"

namespace dlb::bench {

Suite matmul_suite();
Suite conv_suite();
Suite lecture_suite();
Suite train_suite();
Suite amp_suite();
Suite transfer_suite();
Suite dist_suite();
Suite attention_suite();

const std::vector<Suite>& all_suites() {
  static const std::vector<Suite> suites = {
      lecture_suite(), matmul_suite(), conv_suite(), train_suite(), amp_suite(), transfer_suite(), dist_suite(), attention_suite(),
  };
  return suites;
}

const Suite* find_suite(const std::string& name) {
  for (const auto& s : all_suites())
    if (s.name == name) return &s;
  return nullptr;
}

std::string CaseId::name() const {
  std::string n = suite + "/" + op + "/" + device + "/" + dtype;
  for (const auto& [k, v] : params) n += "/" + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
  return n;
}

std::vector<long long> axis_ints(const SuiteOptions& o, const std::string& key, std::vector<long long> fallback) {
  if (!o.axes.contains(key)) return fallback;
  std::vector<long long> out;
  for (const auto& v : o.axes.at(key)) out.push_back(v.get<long long>());
  return out;
}

std::vector<std::string> axis_strings(const SuiteOptions& o, const std::string& key, std::vector<std::string> fallback) {
  if (!o.axes.contains(key)) return fallback;
  std::vector<std::string> out;
  for (const auto& v : o.axes.at(key)) out.push_back(v.is_string() ? v.get<std::string>() : v.dump());
  return out;
}

bool is_gpu(const std::string& device) { return device.rfind("cuda", 0) == 0; }

int gpu_index(const std::string& device) {
  auto p = device.find(':');
  return p == std::string::npos ? 0 : std::stoi(device.substr(p + 1));
}

}  // namespace dlb::bench
