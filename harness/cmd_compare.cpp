// `dlbench compare BASE NEW`, `dlbench baseline save|check`, `dlbench history DIR`: placeholder until
// issue 8 lands.
#include <CLI/CLI.hpp>

#include <memory>

#include "harness/commands.h"
#include "kernels/common/errors.h"

namespace dlb::harness {

void add_compare_command(CLI::App& app, int& rc) {
  auto files = std::make_shared<std::vector<std::string>>();
  CLI::App* sub = app.add_subcommand("compare", "Compare two runs case by case: FASTER / SLOWER / SAME ...");
  sub->add_option("runs", *files, "BASE NEW (results folders or results.json)")->expected(2)->required();
  sub->callback([&rc] { throw UsageError("compare: not available in this build yet"); });
}

}  // namespace dlb::harness
