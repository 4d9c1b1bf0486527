// The dlbench subcommands. Each one lives in its own cmd_<name>.cpp and adds itself to the CLI11 app;
// its callback stores the exit code (0 ok, 1 regression / verification failure, 2 bad usage or input).
#pragma once
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace dlb::harness {

int cli_main(int argc, char** argv);

// The environment variables dlbench reads (DLB_CPU_THREADS, DLBENCH_OPENBLAS_CORE, DLBENCH_MAX_INPUT_MB),
// checked before anything else runs: false after one "dlbench: error:" line on stderr (exit 2).
bool check_environment();

// $DLBENCH_PYTHON, when set, names an executable (UsageError otherwise); see cmd_report.cpp.
void check_python_env();
// The same, and when DLBENCH_PYTHON is set, that it imports matplotlib (before a run, not after).
void check_python_runs_report();

struct CompareOptions;
// The flags that set compare's verdicts (--threshold, --alpha, --time, --max-busy, --noise-floor),
// shared by compare, baseline check and bisect; verdict_options parses them (UsageError on bad ones).
struct VerdictFlags {
  std::string threshold = "5%";
  std::string alpha = "0.05";
  std::string time = "real";
  std::string max_busy = "10%";
  std::string noise_floor;
};
void add_verdict_flags(CLI::App* sub, VerdictFlags& f);
CompareOptions verdict_options(const VerdictFlags& f);

void add_run_command(CLI::App& app, int& rc);      // run, list
void add_info_command(CLI::App& app, int& rc);     // info
void add_report_command(CLI::App& app, int& rc);   // report
void add_compare_command(CLI::App& app, int& rc);  // compare, baseline, history
void add_export_command(CLI::App& app, int& rc);   // export, bisect
void add_train_command(CLI::App& app, int& rc);    // train
void add_data_command(CLI::App& app, int& rc);     // data make, data load

// Writes the HTML report for `runs` into `out` (reports/report.py); returns its exit code.
int generate_report(const std::vector<std::string>& runs, const std::string& out);

}  // namespace dlb::harness
