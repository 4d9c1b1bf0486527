// CLI front: subcommands, and the one rule for errors: one line on stderr, exit 2 for bad usage or
// input, never a stack trace.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <new>

#include "harness/commands.h"
#include "kernels/common/errors.h"

namespace dlb::harness {

namespace {
bool is_subcommand(CLI::App& app, const std::string& name) {
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    if (sub->get_name() == name) return true;
  return false;
}
}  // namespace

int cli_main(int argc, char** argv) {
  CLI::App app{"dlbench: CPU (OpenBLAS) vs GPU (cuBLAS, cuDNN, own CUDA kernels) deep-learning benchmarks.\n"
               "Every case is verified against a reference before it is timed.",
               "dlbench"};
  app.require_subcommand(1);
  app.fallthrough(false);
  app.set_help_all_flag("--help-all", "Help for every subcommand");
  int rc = 0;
  add_run_command(app, rc);
  add_info_command(app, rc);
  add_report_command(app, rc);
  add_compare_command(app, rc);
  add_train_command(app, rc);
  try {
    try {
      app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
      std::cout << app.help();
      return 0;
    } catch (const CLI::CallForAllHelp&) {
      std::cout << app.help("", CLI::AppFormatMode::All);
      return 0;
    } catch (const CLI::ParseError& e) {
      std::string msg = e.what();
      if (argc < 2) msg = "no subcommand given (try: dlbench --help)";
      else if (argv[1][0] != '-' && !is_subcommand(app, argv[1]))
        msg = std::string("unknown subcommand '") + argv[1] + "' (try: dlbench --help)";
      std::cerr << "dlbench: error: " << msg << "\n";
      return 2;
    }
  } catch (const UsageError& e) {
    std::cerr << "dlbench: error: " << e.what() << "\n";
    return 2;
  } catch (const InputError& e) {
    std::cerr << "dlbench: error: " << e.what() << "\n";
    return 2;
  } catch (const OutOfMemory& e) {
    std::cerr << "dlbench: error: " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "dlbench: error: out of memory\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "dlbench: error: " << e.what() << "\n";
    return 1;
  }
  return rc;
}

}  // namespace dlb::harness
