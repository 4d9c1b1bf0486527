// Child processes and interrupts (see child.h).
#include "kernels/common/child.h"

#include <fcntl.h>
#include <pthread.h>
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

namespace {

// Starts argv[0] (PATH lookup) with the environment run_child describes, stdout and stderr on
// out_fd, stdin on in_fd (-1: inherited), in its own process group, tracked. Returns the pid, or -1
// with *why the reason.
pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env_set,
            const std::vector<std::string>& env_unset, int in_fd, int out_fd, std::string* why) {
  if (argv.empty()) {
    *why = "no command";
    return -1;
  }
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

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (in_fd >= 0) posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
  posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
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
  if (err != 0) {
    *why = "cannot start " + argv[0] + ": " + std::strerror(err);
    return -1;
  }
  track(pid);
  if (interrupt_requested()) ::kill(pid, SIGINT);  // the signal came while it was being started
  return pid;
}

int wait_child(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  untrack(pid);
  return status;
}

}  // namespace

int run_child(const std::vector<std::string>& argv, const std::vector<std::string>& env_set,
              const std::vector<std::string>& env_unset, std::string* output) {
  output->clear();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    *output = std::string("cannot create a pipe: ") + std::strerror(errno);
    return -1;
  }
  const pid_t pid = spawn(argv, env_set, env_unset, -1, fds[1], output);
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return -1;
  }
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) output->append(buf, static_cast<std::size_t>(n));
    else if (n == 0 || errno != EINTR) break;
  }
  ::close(fds[0]);
  return wait_child(pid);
}

LineChild::LineChild(const std::vector<std::string>& argv) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) throw std::runtime_error(std::string("cannot create a pipe: ") + std::strerror(errno));
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]), ::close(in[1]);
    throw std::runtime_error(std::string("cannot create a pipe: ") + std::strerror(errno));
  }
  std::string why;
  pid_ = spawn(argv, {}, {}, in[0], out[1], &why);
  ::close(in[0]), ::close(out[1]);
  if (pid_ < 0) {
    ::close(in[1]), ::close(out[0]);
    throw std::runtime_error(why);
  }
  to_ = in[1], from_ = out[0];
}

LineChild::~LineChild() { finish(); }

bool LineChild::send(const std::string& line) {
  if (to_ < 0) return false;
  const std::string s = line + "\n";
  // SIGPIPE would kill us when the child has gone: MSG_NOSIGNAL exists only for sockets, so it is
  // blocked around the writes (EPIPE is the answer then) and a raised one consumed before the mask
  // is restored: also one raised by a write that got part of its bytes through before the reader
  // went (Linux then returns the count and still raises it).
  sigset_t pipe_set, old, pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  std::size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(to_, s.data() + done, s.size() - done);
    if (n > 0) done += static_cast<std::size_t>(n);
    else if (n < 0 && errno == EINTR) continue;
    else break;
  }
  if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) {
    struct timespec zero {};
    siginfo_t info;
    sigtimedwait(&pipe_set, &info, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return done == s.size();
}

bool LineChild::read_line(std::string* line) {
  for (;;) {
    const std::size_t nl = buf_.find('\n');
    if (nl != std::string::npos) {
      *line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      return true;
    }
    if (from_ < 0) break;
    char b[4096];
    const ssize_t n = ::read(from_, b, sizeof b);
    if (n > 0) buf_.append(b, static_cast<std::size_t>(n));
    else if (n < 0 && errno == EINTR) continue;
    else {
      ::close(from_);
      from_ = -1;
    }
  }
  if (buf_.empty()) return false;
  *line = buf_;  // a last line without its newline
  buf_.clear();
  return true;
}

int LineChild::finish(std::string* rest) {
  if (to_ >= 0) ::close(to_), to_ = -1;  // end of input: the child's loop ends
  std::string line;
  while (read_line(&line))
    if (rest) *rest += line + "\n";
  if (pid_ > 0) status_ = wait_child(pid_), pid_ = -1;
  return status_;
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
