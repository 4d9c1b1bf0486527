// `dlbench history DIR --html OUT`: a static dashboard of every machine's history in DIR, in the
// manner of `asv publish`: OUT/index.html, one self-contained page (no server, no network) made of
// reports/dashboard/dashboard.html + dashboard.js with the histories embedded as JSON. The script
// draws per case one SVG trend of the run medians over the run dates, a line per machine, the steps
// history flags marked, each point a link to its run's report (RUN/report/index.html, else its
// results file); current regressions (a flagged step to slower, or failed in the latest run) are
// listed first; filters by suite, device and name.
//
// Why one renderer fed by JSON, not a plot per case: 200 runs x 3 machines x 50 cases are 30,000
// points; as embedded numbers they are ~1 MB and the page draws them in well under a second, where
// a PNG per case (matplotlib) costs ~0.1 s each to make.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/history.h"

namespace dlb::harness {

// The page's data: machines (runs with dates, commits and links relative to `out_dir`), cases (per
// machine the medians, the step, whether it is a current regression), the regressions, warnings.
nlohmann::json dashboard_json(const std::vector<History>& histories, const HistoryOptions& opts, const std::string& out_dir);

struct DashboardSummary {
  std::size_t machines = 0, runs = 0, cases = 0, regressions = 0;
};

// Loads DIR strictly (HistoryOptions::strict), writes OUT/index.html (OUT made if needed; UsageError
// when it cannot be), and returns what it holds.
DashboardSummary write_dashboard(const std::string& dir, HistoryOptions opts, const std::string& out_dir);

}  // namespace dlb::harness
