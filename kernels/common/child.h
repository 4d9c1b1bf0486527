// Child processes and interrupts, for every layer that starts one (the OpenBLAS core probe, the
// PyTorch peer, the report generator): one process-wide "interrupt requested" flag, a registry of
// running children that a signal is forwarded to, and a spawn helper that captures the child's output.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

namespace dlb {

// Set by the first SIGINT/SIGTERM/SIGHUP while an InterruptScope is active.
bool interrupt_requested();

// A case abandoned because the user interrupted the run (not a failure: it is not recorded).
struct Interrupted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// While alive, SIGINT, SIGTERM and SIGHUP set interrupt_requested() and are forwarded to the running
// children; a second signal kills the children and exits 130 at once. `message` (static storage) is
// written to stderr on the first signal. Nested scopes keep the outer one's handlers.
class InterruptScope {
 public:
  explicit InterruptScope(const char* message);
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

 private:
  bool installed_ = false;
};

// Runs argv[0] (looked up in PATH) with `env_set` ("NAME=value") added to and `env_unset` removed
// from this environment, its stdout+stderr captured into *output. The child is registered while it
// runs so that signals reach it. Returns the waitpid status; -1 with *output the reason when it
// could not start.
int run_child(const std::vector<std::string>& argv, const std::vector<std::string>& env_set,
              const std::vector<std::string>& env_unset, std::string* output);

// A child that answers line by line (the PyTorch peer serving one epoch per request): started like
// run_child (this environment), its stdin a pipe we write, its stdout+stderr a pipe we read; tracked
// while it runs, so that signals reach it. The destructor ends its input and waits for it.
class LineChild {
 public:
  explicit LineChild(const std::vector<std::string>& argv);  // throws std::runtime_error: cannot start
  ~LineChild();
  LineChild(const LineChild&) = delete;
  LineChild& operator=(const LineChild&) = delete;
  bool send(const std::string& line);  // false when the child no longer reads
  bool read_line(std::string* line);   // one line of its output (no newline); false at its end
  // Ends its input, reads what is left (appended to *rest), waits; the waitpid status.
  int finish(std::string* rest = nullptr);

 private:
  int pid_ = -1, to_ = -1, from_ = -1, status_ = 0;
  std::string buf_;
};

// For a child started elsewhere (posix_spawn with inherited output): signals reach it while tracked.
void track_child(int pid);
void untrack_child(int pid);

// In a dlbench started by run_child: die with the parent (the probe must not outlive a killed run).
void die_with_parent_if_child();

}  // namespace dlb
