// `dlbench report RUN_DIR... --out DIR`: placeholder until issue 7 lands (reports/report.py).
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "harness/commands.h"
#include "kernels/common/errors.h"

namespace dlb::harness {

int generate_report(const std::vector<std::string>&, const std::string&) { return 1; }

void add_report_command(CLI::App& app, int& rc) {
  auto runs = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("report", "Write an HTML report with plots from results folders");
  sub->add_option("runs", *runs, "Results folders or results.json files")->required();
  sub->add_option("--out,-o", *out, "Report folder");
  sub->callback([runs, out, &rc] { throw UsageError("report: not available in this build yet"); });
}

}  // namespace dlb::harness
