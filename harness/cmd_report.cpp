// `dlbench report RUN_DIR... [--out DIR]`: runs reports/report.py (Python + matplotlib), which writes
// DIR/index.html with PNG plots and every table as CSV and Markdown. Also called at the end of
// `dlbench run`. The interpreter: $DLBENCH_PYTHON (the ./dlbench launcher sets it to a Python that
// imports matplotlib), else /usr/bin/python3, else python3 from PATH. Started with posix_spawn and an
// argv array (no shell, so any path is passed as is); report.py's exit code is forwarded (2 = bad input,
// and report.py has already printed its one line).
#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <signal.h>
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

// $DLBENCH_PYTHON must name an executable file (or a program found in PATH); checked before anything
// runs, so a wrong one is bad input (exit 2) with one line, not a silent failure of the child.
void check_python_env() {
  const char* p = std::getenv("DLBENCH_PYTHON");
  if (!p || !*p) return;
  const std::string py = p;
  auto bad = [&](const std::string& why) { return UsageError("DLBENCH_PYTHON=" + py + ": " + why); };
  if (py.find('/') == std::string::npos) {
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "";
    for (std::size_t a = 0; a <= dirs.size();) {
      std::size_t b = dirs.find(':', a);
      if (b == std::string::npos) b = dirs.size();
      const std::string cand = (b > a ? dirs.substr(a, b - a) : std::string(".")) + "/" + py;
      struct stat st {};
      if (::stat(cand.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(cand.c_str(), X_OK) == 0) return;
      a = b + 1;
    }
    throw bad("not found in PATH (set it to a python3 with matplotlib)");
  }
  struct stat st {};
  if (::stat(py.c_str(), &st) != 0) throw bad(std::string(std::strerror(errno)) + " (set it to a python3 with matplotlib)");
  if (!S_ISREG(st.st_mode) || ::access(py.c_str(), X_OK) != 0)
    throw bad("not an executable file (set it to a python3 with matplotlib)");
}

void check_python_runs_report() {
  check_python_env();
  const char* p = std::getenv("DLBENCH_PYTHON");
  if (!p || !*p) return;  // the default interpreter is tried when the report is written
  // A run takes minutes to hours: an interpreter that cannot import matplotlib is refused before it.
  std::string py = p;
  std::vector<std::string> args = {py, "-c", "import matplotlib"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int err = ::posix_spawnp(&pid, py.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  int status = 0;
  if (err == 0)
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  if (err != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw UsageError("DLBENCH_PYTHON=" + py + ": cannot import matplotlib (set it to a python3 with matplotlib, or pass --no-report)");
}

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
  // The child's stderr comes through a pipe and is passed on as is; whether it said anything decides
  // whether a failure needs a line of ours.
  int errpipe[2] = {-1, -1};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  const bool relay = ::pipe2(errpipe, O_CLOEXEC) == 0;
  if (relay) posix_spawn_file_actions_adddup2(&fa, errpipe[1], 2);
  // Default dispositions for the signals we forward: a shell starts a background job with SIGINT
  // ignored, and a child that inherits that would never stop on the SIGINT passed on to it.
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &defaults);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  const int err = ::posix_spawnp(&pid, python.c_str(), &fa, &at, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  // Tracked before its output is read: a signal to us reaches it at once, not after it has exited.
  if (err == 0) {
    track_child(pid);
    if (interrupt_requested()) ::kill(pid, SIGINT);  // the signal came while it was being started
  }
  bool report_printed_error = false;
  if (relay) {
    ::close(errpipe[1]);
    char buf[4096];
    while (true) {
      const ssize_t n = ::read(errpipe[0], buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      report_printed_error = true;
      (void)!::write(2, buf, static_cast<std::size_t>(n));
    }
    ::close(errpipe[0]);
  }
  if (err != 0) {
    std::cerr << "dlbench: error: report: cannot start " << python << " (" << std::strerror(err)
              << "); set DLBENCH_PYTHON to a python3 with matplotlib\n";
    return 1;
  }
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
    if (code == 127) {  // the exec itself failed in the child
      std::cerr << "dlbench: error: report: cannot run " << python << "; set DLBENCH_PYTHON to a python3 with matplotlib\n";
      return 2;
    }
    // report.py prints its own line for bad input (2); any other failure without a word from it (a
    // DLBENCH_PYTHON that is no Python, like /bin/false) gets one here.
    if (code != 0 && code != 2 && code != 130 && !report_printed_error)
    {
      std::cerr << "dlbench: error: report: " << python << " exited with status " << code
                << " and said nothing (is DLBENCH_PYTHON a python3 with matplotlib?)\n";
      return 2;
    }
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
  sub->callback([runs, out, sub, &rc] {
    if (sub->count("--out") && out->empty()) throw UsageError("--out: empty folder name");
    check_python_env();
    for (const auto& r : *runs) check_results_input(r);  // report.py never meets a FIFO, device or huge file
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
