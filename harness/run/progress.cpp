// Progress lines and the end-of-run tables (see progress.h).
#include "harness/run/progress.h"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "bench/profile.h"
#include "bench/suite.h"
#include "harness/records.h"
#include "harness/tables.h"

namespace dlb::harness {

using json = nlohmann::json;

std::string throughput_text(const json& r) {
  const MetricInfo* m = entry_metric(r);  // records.h: the one table of metrics and units
  return m ? fmt_number(r.at(m->key).get<double>()) + " " + m->unit : "";
}

Progress::Progress(std::size_t total, std::size_t kept) : total_(total), kept_(kept) {}

std::string Progress::prefix(std::size_t i) const {
  char buf[32];
  std::snprintf(buf, sizeof buf, "[%*zu/%zu] ", static_cast<int>(std::to_string(total_).size()), i + 1, total_);
  return buf;
}

void Progress::finished(const json& record, bool show_eta) {
  std::ostringstream line;
  if (record.value("error_occurred", false)) {
    line << (record.contains("skipped") ? "SKIPPED " : "FAILED ") << record.value("error_message", "");
  } else {
    char buf[64];
    std::snprintf(buf, sizeof buf, "ok (err %.1e) ", record.value("max_rel_err", 0.0));
    line << buf << fmt_seconds(record.value("real_time", 0.0) * 1e-6);
    if (const std::string t = throughput_text(record); !t.empty()) line << "  " << t;
    if (record.contains("pct_of_peak")) line << " (" << fmt_number(record.at("pct_of_peak").get<double>(), 3) << "% of peak)";
  }
  ++done_;
  const std::size_t todo = total_ - kept_;
  if (show_eta && done_ < todo) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double left = elapsed / double(done_) * double(todo - done_);
    char buf[48];
    if (left < 90) std::snprintf(buf, sizeof buf, "  eta %.0fs", left);
    else std::snprintf(buf, sizeof buf, "  eta %.0fm%02.0fs", std::floor(left / 60), std::fmod(left, 60));
    line << buf;
  }
  std::cerr << line.str() << "\n";
  if (record.contains("profile")) {
    const json& p = record["profile"];
    const std::string name = record.value("run_name", record.value("name", ""));
    if (p.contains("error")) std::cerr << "dlbench: profile of " << name << " failed: " << p["error"].get<std::string>() << "\n";
    else bench::print_profile(std::cout, name, p);
  }
}

void print_tables(std::ostream& out, const std::vector<const bench::Suite*>& order, const std::vector<std::vector<json>>& records) {
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (records[i].empty()) continue;
    out << "\n## " << order[i]->name << "\n\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& r : records[i]) {
      const std::string thr = throughput_text(r);
      const std::string pct = r.contains("pct_of_peak") ? fmt_number(r.at("pct_of_peak").get<double>(), 3) : "-";
      const bool err = r.value("error_occurred", false);
      const std::string status = r.contains("skipped") ? "skipped"
                                 : err ? (r.value("error", "") == "out of memory" ? "out of memory" : "FAILED")
                                       : "yes";
      rows.push_back({r.value("run_name", ""), status, err ? "-" : fmt_seconds(r.value("real_time", 0.0) * 1e-6),
                      thr.empty() ? "-" : thr, pct});
    }
    print_table(out, {"Case", "Verified", "Median time", "Throughput", "% of peak"}, rows);
    if (order[i]->summarize) order[i]->summarize(records[i], out);
  }
}

}  // namespace dlb::harness
