// The history dashboard's data and page (see dashboard.h).
#include "harness/dashboard.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <map>

#include "harness/build_info.h"
#include "harness/results.h"
#include "kernels/common/errors.h"
#include "kernels/common/safe_file.h"

namespace fs = std::filesystem;

namespace dlb::harness {

using json = nlohmann::json;

namespace {

// What a point links to: the run's report when it has one, else its results file.
std::string run_link(const std::string& run, const fs::path& out_abs) {
  std::error_code ec;
  fs::path target = fs::absolute(run, ec).lexically_normal();
  if (fs::is_directory(target, ec)) {
    if (fs::exists(target / "report" / "index.html", ec)) target /= fs::path("report") / "index.html";
    else target /= fs::exists(target / "results.json", ec) ? "results.json" : "results.jsonl";
  }
  return target.lexically_relative(out_abs).generic_string();
}

// "suite/op/device/dtype/k=v..." -> its first four parts.
std::vector<std::string> name_parts(const std::string& name) {
  std::vector<std::string> p;
  std::size_t a = 0;
  while (p.size() < 4) {
    const std::size_t b = name.find('/', a);
    p.push_back(name.substr(a, b == std::string::npos ? std::string::npos : b - a));
    if (b == std::string::npos) break;
    a = b + 1;
  }
  p.resize(4);
  return p;
}

std::string read_template(const std::string& name) {
  const std::string path = std::string(DLB_SOURCE_DIR) + "/reports/dashboard/" + name;
  return read_file_safely(path, 4u << 20);  // InputError naming it when missing
}

void replace_once(std::string& s, const std::string& marker, const std::string& with) {
  const std::size_t at = s.find(marker);
  if (at == std::string::npos) throw std::runtime_error("dashboard template: no " + marker);
  s.replace(at, marker.size(), with);
}

}  // namespace

json dashboard_json(const std::vector<History>& hs, const HistoryOptions& opts, const std::string& out_dir) {
  std::error_code ec;
  const fs::path out_abs = fs::absolute(out_dir, ec).lexically_normal();
  json machines = json::array(), cases = json::array(), regressions = json::array();
  std::map<std::string, std::size_t> case_index;
  std::size_t nruns = 0;
  for (std::size_t m = 0; m < hs.size(); ++m) {
    const History& h = hs[m];
    json runs = json::array();
    for (const auto& r : h.runs)
      runs.push_back({{"t", r.when}, {"date", r.date}, {"git", r.git}, {"href", run_link(r.path, out_abs)}});
    nruns += h.runs.size();
    machines.push_back({{"key", h.key.empty() ? std::string("unknown machine") : h.key}, {"runs", std::move(runs)}});
    for (const auto& t : h.cases) {
      auto [it, fresh] = case_index.try_emplace(t.name, cases.size());
      if (fresh) {
        const auto p = name_parts(t.name);
        cases.push_back({{"name", t.name}, {"suite", p[0]}, {"op", p[1]}, {"device", p[2]}, {"dtype", p[3]}, {"lines", json::array()}});
      }
      json step = nullptr;
      if (t.step.found) step = {{"i", t.step.at}, {"ratio", t.step.ratio}, {"score", t.step.score}};
      const bool slower = t.step.found && t.step.ratio > 1;
      json& lines = cases[it->second]["lines"];
      if (slower || t.failed_latest) {
        json r = {{"case", it->second}, {"line", lines.size()}, {"failed", t.failed_latest}};
        if (slower) r.update({{"ratio", t.step.ratio}, {"run", t.runs[t.step.at]}});
        regressions.push_back(std::move(r));
      }
      lines.push_back({{"m", m}, {"runs", t.runs}, {"us", t.medians_us}, {"step", step}, {"failed_latest", t.failed_latest},
                       {"regression", slower || t.failed_latest}});
    }
  }
  // Failed first, then the largest slowdown.
  std::stable_sort(regressions.begin(), regressions.end(), [](const json& a, const json& b) {
    if (a["failed"] != b["failed"]) return a["failed"] == true;
    return a.value("ratio", 0.0) > b.value("ratio", 0.0);
  });
  char now[32];
  const std::time_t t = std::time(nullptr);
  std::strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return {{"generated", now},
          {"threshold", opts.threshold},
          {"min_segment", opts.min_segment},
          {"time", opts.time == TimeField::cpu ? "cpu_time" : "real_time"},
          {"runs", nruns},
          {"machines", std::move(machines)},
          {"cases", std::move(cases)},
          {"regressions", std::move(regressions)},
          {"warnings", hs.empty() ? json::array() : json(hs.front().warnings)}};
}

DashboardSummary write_dashboard(const std::string& dir, HistoryOptions opts, const std::string& out_dir) {
  opts.strict = true;
  const std::vector<History> hs = load_histories(dir, opts);
  std::string page = read_template("dashboard.html");
  const std::string script = read_template("dashboard.js");
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec || !fs::is_directory(out_dir, ec)) throw UsageError("--html " + out_dir + ": cannot create the folder");
  const json data = dashboard_json(hs, opts, out_dir);
  // Inside <script>, "</script>" or "<!--" in a case name would end it: every '<' as \u003c (valid JSON).
  std::string text = data.dump(-1, ' ', false, json::error_handler_t::replace), safe;
  safe.reserve(text.size());
  for (char c : text) safe += c == '<' ? std::string("\\u003c") : std::string(1, c);
  replace_once(page, "{{SCRIPT}}", script);  // ours first: the data may hold any text
  replace_once(page, "{{DATA}}", safe);
  try {
    write_file_atomically(out_dir + "/index.html", page);
  } catch (const std::runtime_error& e) {
    throw UsageError(std::string("--html: ") + e.what());
  }
  DashboardSummary s;
  s.machines = hs.size();
  s.runs = data["runs"].get<std::size_t>();
  s.cases = data["cases"].size();
  s.regressions = data["regressions"].size();
  return s;
}

}  // namespace dlb::harness
