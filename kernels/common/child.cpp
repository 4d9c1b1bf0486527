// Child processes and interrupts (see child.h).
#include "kernels/common/child.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

extern char** environ;

namespace dlb {

namespace {

std::atomic<bool> g_interrupted{false};
std::atomic<int> g_scopes{0};
const char* g_message = "";
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_old[3];

constexpr int kMaxChildren = 16;
std::atomic<pid_t> g_children[kMaxChildren];

void forward(int sig) {  // async-signal-safe
  for (auto& c : g_children) {
    const pid_t p = c.load();
    if (p > 0) ::kill(p, sig);
  }
}

extern "C" void on_interrupt(int sig) {
  if (g_interrupted.exchange(true)) {  // second signal: leave now (results.jsonl is already on disk)
    forward(SIGKILL);
    _exit(130);
  }
  (void)!::write(2, g_message, std::strlen(g_message));
  forward(sig);
}

void track(pid_t pid) {
  for (auto& c : g_children) {
    pid_t zero = 0;
    if (c.compare_exchange_strong(zero, pid)) return;
  }
}

void untrack(pid_t pid) {
  for (auto& c : g_children) {
    pid_t p = pid;
    if (c.compare_exchange_strong(p, 0)) return;
  }
}

}  // namespace

bool interrupt_requested() { return g_interrupted.load(); }

InterruptScope::InterruptScope(const char* message) {
  if (g_scopes.fetch_add(1) != 0) return;
  installed_ = true;
  g_message = message;
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &sa, &g_old[i]);
}

InterruptScope::~InterruptScope() {
  g_scopes.fetch_sub(1);
  if (!installed_) return;
  for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &g_old[i], nullptr);
}

int run_child(const std::vector<std::string>& argv, const std::vector<std::string>& env_set,
              const std::vector<std::string>& env_unset, std::string* output) {
  output->clear();
  if (argv.empty()) return -1;
  // Environment: ours, less env_unset and the names env_set replaces, plus env_set and the parent pid.
  std::vector<std::string> env_strs = env_set;
  env_strs.push_back("DLBENCH_PARENT_PID=" + std::to_string(::getpid()));
  auto dropped = [&](const char* kv) {
    const char* eq = std::strchr(kv, '=');
    const std::string name(kv, eq ? eq - kv : std::strlen(kv));
    for (const auto& u : env_unset)
      if (u == name) return true;
    for (const auto& s : env_strs)
      if (s.compare(0, name.size() + 1, name + "=") == 0) return true;
    return false;
  };
  std::vector<char*> envp;
  for (char** e = environ; e && *e; ++e)
    if (!dropped(*e)) envp.push_back(*e);
  for (auto& s : env_strs) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> av;
  for (auto& a : args) av.push_back(a.data());
  av.push_back(nullptr);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    *output = std::string("cannot create a pipe: ") + std::strerror(errno);
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int s : kSignals) sigaddset(&defaults, s);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &defaults);
  // Its own process group: a terminal's Ctrl-C reaches it once, through our forwarding.
  posix_spawnattr_setpgroup(&at, 0);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  pid_t pid = 0;
  const int err = ::posix_spawnp(&pid, av[0], &fa, &at, av.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  ::close(fds[1]);
  if (err != 0) {
    ::close(fds[0]);
    *output = "cannot start " + argv[0] + ": " + std::strerror(err);
    return -1;
  }
  track(pid);
  if (interrupt_requested()) ::kill(pid, SIGINT);  // the signal came while it was being started
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) output->append(buf, static_cast<std::size_t>(n));
    else if (n == 0 || errno != EINTR) break;
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  untrack(pid);
  return status;
}

void track_child(int pid) { track(pid); }
void untrack_child(int pid) { untrack(pid); }

void die_with_parent_if_child() {
  const char* p = std::getenv("DLBENCH_PARENT_PID");
  if (!p || !*p) return;
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (std::to_string(::getppid()) != p) ::raise(SIGTERM);  // the parent died before we got here
}

}  // namespace dlb
