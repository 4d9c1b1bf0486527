// CLI front: subcommands, and the one rule for errors: one line on stderr, exit 2 for bad usage or
// input, never a stack trace.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <new>

#include <nlohmann/json.hpp>

#include "harness/commands.h"
#include "harness/results.h"
#include "harness/sweep.h"
#include "kernels/common/errors.h"
#include "kernels/common/rnn_step_env.h"
#include "kernels/cpu/openblas_core.h"
#include "kernels/cpu/threads.h"

namespace dlb::harness {

namespace {
bool is_subcommand(CLI::App& app, const std::string& name) {
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    if (sub->get_name() == name) return true;
  return false;
}
}  // namespace

bool check_environment() {
  try {
    if (const char* v = std::getenv("DLB_CPU_THREADS"); v && *v)
      parse_int(v, "DLB_CPU_THREADS", 1, cpu::kMaxKernelThreads);
    max_input_bytes();
    rnn_step_fused_from_env();  // a bad DLB_RNN_STEP, in CPU-only builds too
    const std::string why = cpu::openblas_core_env_problem();
    if (!why.empty()) throw UsageError("DLBENCH_OPENBLAS_CORE=" + std::string(std::getenv("DLBENCH_OPENBLAS_CORE")) + ": " + why);
  } catch (const UsageError& e) {
    std::cerr << "dlbench: error: " << e.what() << "\n";
    return false;
  }
  return true;
}

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
  add_export_command(app, rc);
  add_train_command(app, rc);
  add_data_command(app, rc);
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
      else if (argv[1][0] == '-')
        msg = std::string("unknown option '") + argv[1] + "' before the subcommand (try: dlbench --help)";
      else if (std::string(argv[1]) == "baseline" && (argc < 3 || (std::string(argv[2]) != "save" && std::string(argv[2]) != "check")))
        msg = argc < 3 ? "baseline: expected save or check (try: dlbench baseline --help)"
                       : std::string("baseline: unknown subcommand '") + argv[2] + "' (expected save or check)";
      else if (std::string(argv[1]) == "data" &&
               (argc < 3 || (std::string(argv[2]) != "make" && std::string(argv[2]) != "load" && std::string(argv[2]) != "show")))
        msg = argc < 3 ? "data: expected make, load or show (try: dlbench data --help)"
                       : std::string("data: unknown subcommand '") + argv[2] + "' (expected make, load or show)";
      else if (std::string(argv[1]) == "data" && argc == 3)
        msg = std::string("data ") + argv[2] + ": expected: " +
              (std::string(argv[2]) == "make" ? "data make cifar10|gpt2 DIR"
               : std::string(argv[2]) == "load" ? "data load DATASET" : "data show FILE");
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
  } catch (const std::filesystem::filesystem_error& e) {  // a path that cannot be looked at (ELOOP, EACCES)
    std::cerr << "dlbench: error: " << e.path1().string() << ": " << e.code().message() << "\n";
    return 2;
  } catch (const nlohmann::json::exception& e) {  // a field of an input file the loader did not vet
    std::cerr << "dlbench: error: an input file holds a value of an unexpected type (" << e.what() << ")\n";
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
