// `dlbench report RUN_DIR... [--out DIR]`: runs reports/report.py (Python + matplotlib), which writes
// DIR/index.html with PNG plots and every table as CSV and Markdown. Also called at the end of
// `dlbench run`. The interpreter: $DLBENCH_PYTHON (the ./dlbench launcher sets it to a Python that
// imports matplotlib), else /usr/bin/python3, else python3 from PATH. Started with posix_spawn and an
// argv array (no shell, so any path is passed as is); report.py's exit code is forwarded (2 = bad input,
// and report.py has already printed its one line).
#include <CLI/CLI.hpp>

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>

#include "harness/build_info.h"
#include "harness/commands.h"
#include "harness/results.h"
#include "kernels/common/child.h"
#include "kernels/common/errors.h"

extern char** environ;

namespace dlb::harness {

namespace {

std::string report_python() {
  if (const char* p = std::getenv("DLBENCH_PYTHON"); p && *p) return p;
  if (::access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  return "python3";  // looked up in PATH by posix_spawnp
}

std::string report_script() { return std::string(DLB_SOURCE_DIR) + "/reports/report.py"; }

// The folder a report goes to by default: RUN_DIR/report, or beside a results file given directly.
std::string default_out(const std::string& first) {
  struct stat st {};
  if (::stat(first.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    const auto slash = first.find_last_of('/');
    return (slash == std::string::npos ? std::string(".") : first.substr(0, slash + 1)) + "report";
  }
  std::string d = first;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  return d + "/report";
}

}  // namespace

int generate_report(const std::vector<std::string>& runs, const std::string& out) {
  const std::string python = report_python(), script = report_script();
  if (::access(script.c_str(), R_OK) != 0) {
    std::cerr << "dlbench: error: " << script << ": report generator not found (" << std::strerror(errno) << ")\n";
    return 1;
  }
  // argv: python report.py --out OUT -- RUN...  ("--" so a run folder named "-x" stays a folder)
  std::vector<std::string> args = {python, script, "--out", out, "--"};
  args.insert(args.end(), runs.begin(), runs.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  std::cout.flush();
  std::cerr.flush();
  InterruptScope scope("\ndlbench: interrupted -- stopping the report generator (again to quit now)\n");
  pid_t pid = 0;
  const int err = ::posix_spawnp(&pid, python.c_str(), nullptr, nullptr, argv.data(), environ);
  if (err != 0) {
    std::cerr << "dlbench: error: report: cannot start " << python << " (" << std::strerror(err)
              << "); set DLBENCH_PYTHON to a python3 with matplotlib\n";
    return 1;
  }
  track_child(pid);  // a signal to us reaches it (InterruptScope forwards)
  if (interrupt_requested()) ::kill(pid, SIGINT);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      std::cerr << "dlbench: error: report: waiting for " << python << " failed (" << std::strerror(errno) << ")\n";
      untrack_child(pid);
      return 1;
    }
  }
  untrack_child(pid);
  if (interrupt_requested()) return 130;
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    if (code == 127)  // the exec itself failed in the child
      std::cerr << "dlbench: error: report: cannot run " << python << "; set DLBENCH_PYTHON to a python3 with matplotlib\n";
    return code;
  }
  if (WIFSIGNALED(status)) {
    std::cerr << "dlbench: error: report: " << python << " was killed by signal " << WTERMSIG(status) << "\n";
    return WTERMSIG(status) == SIGINT ? 130 : 1;
  }
  return 1;
}

void add_report_command(CLI::App& app, int& rc) {
  auto runs = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("report", "Write an HTML report with plots from results folders");
  sub->add_option("runs", *runs, "Results folders (or results.json / results.jsonl files)")->required();
  sub->add_option("--out,-o", *out, "Report folder (default: FIRST_RUN/report)");
  sub->callback([runs, out, &rc] {
    const std::string dir = out->empty() ? default_out(runs->front()) : *out;
    rc = generate_report(*runs, dir);
    if (rc != 0) return;
    for (const auto& r : *runs) {  // how far each run got: "N of M cases" when it recorded its plan
      try {
        const RunState st = run_state(load_results(r));
        if (st.planned > 0) std::cout << r << ": " << st.done << " of " << st.planned << " cases (" << st.state << ")\n";
      } catch (const std::exception&) {
      }
    }
    std::cout << "report: " << dir << "/index.html\n";
  });
}

}  // namespace dlb::harness
