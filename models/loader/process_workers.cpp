// Process workers (see workers.h): fork()ed after the dataset is open and the slots mapped, each with
// a task pipe (loader -> worker, Task records) and a done pipe (worker -> loader, Done records under
// PIPE_BUF, so each write is whole). A done pipe that ends without a record is a worker that died:
// waitpid says how. A worker leaves by _exit, never through the loader's atexit handlers or stdio.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "kernels/common/child.h"
#include "kernels/common/errors.h"
#include "models/loader/workers.h"

namespace dlb::models::loader {

namespace {

static_assert(sizeof(Done) < PIPE_BUF, "a Done record must be written atomically");

bool read_whole(int fd, void* p, std::size_t n) {  // false at end of file (or an error)
  auto* b = static_cast<char*>(p);
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd, b + got, n - got);
    if (r > 0) got += static_cast<std::size_t>(r);
    else if (r < 0 && errno == EINTR) continue;
    else return false;
  }
  return true;
}

bool write_whole(int fd, const void* p, std::size_t n) {
  const auto* b = static_cast<const char*>(p);
  std::size_t done = 0;
  while (done < n) {
    const ssize_t r = ::write(fd, b + done, n - done);
    if (r > 0) done += static_cast<std::size_t>(r);
    else if (r < 0 && errno == EINTR) continue;
    else return false;
  }
  return true;
}

std::string how_it_ended(int status) {
  if (WIFSIGNALED(status)) {
    const int s = WTERMSIG(status);
    const char* name = ::strsignal(s);
    return "killed by signal " + std::to_string(s) + (name ? std::string(" (") + name + ")" : "");
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended (status " + std::to_string(status) + ")";
}

class ProcessWorkers : public WorkerPool {
 public:
  ProcessWorkers(int n, const Source& src, const MakerConfig& cfg, const SlotArena& slots, const Fault& fault)
      : w_(static_cast<std::size_t>(n)) {
    const pid_t parent = ::getpid();
    for (int k = 0; k < n; ++k) {
      int task[2], done[2];
      if (::pipe2(task, O_CLOEXEC) != 0) fail_start("a pipe");
      if (::pipe2(done, O_CLOEXEC) != 0) {
        ::close(task[0]), ::close(task[1]);
        fail_start("a pipe");
      }
      const pid_t pid = ::fork();
      if (pid < 0) {
        for (int fd : {task[0], task[1], done[0], done[1]}) ::close(fd);
        fail_start("a process");
      }
      if (pid == 0) {
        ::close(task[1]), ::close(done[0]);
        for (int j = 0; j < k; ++j) ::close(w_[j].task_w), ::close(w_[j].done_r);  // the loader's ends of earlier workers
        worker_main(k, parent, task[0], done[1], src, cfg, slots, fault);
      }
      ::close(task[0]), ::close(done[1]);
      w_[k] = W{pid, task[1], done[0], true};
      track_child(pid);  // a second Ctrl-C SIGKILLs tracked children before dlbench exits
    }
  }
  ~ProcessWorkers() override { stop(); }
  int size() const override { return static_cast<int>(w_.size()); }
  std::vector<int> pids() const override {
    std::vector<int> p;
    for (const auto& w : w_)
      if (w.pid > 0) p.push_back(w.pid);
    return p;
  }

  void submit(int worker, const Task& t) override {
    W& w = w_[static_cast<std::size_t>(worker)];
    // SIGPIPE (a worker gone) would kill the loader: blocked around the write, EPIPE is the answer,
    // and the dead worker's done pipe says how it ended at the next wait().
    sigset_t pipe_set, old, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    (void)write_whole(w.task_w, &t, sizeof t);
    if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) {
      timespec zero{};
      siginfo_t info;
      sigtimedwait(&pipe_set, &info, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }

  bool wait(Done* d, int timeout_ms) override {
    std::vector<pollfd> fds;
    std::vector<std::size_t> who;
    for (std::size_t k = 0; k < w_.size(); ++k)
      if (w_[k].alive) fds.push_back(pollfd{w_[k].done_r, POLLIN, 0}), who.push_back(k);
    if (fds.empty()) return false;
    const int r = ::poll(fds.data(), fds.size(), timeout_ms);
    if (r <= 0) return false;  // timeout, or EINTR (a signal: the caller checks for an interrupt)
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      W& w = w_[who[i]];
      if (read_whole(w.done_r, d, sizeof *d)) {
        d->message[sizeof d->message - 1] = 0;
        return true;
      }
      // The pipe ended: the worker is gone. How, from waitpid.
      int status = 0;
      while (::waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
      }
      untrack_child(w.pid);
      const std::string why = "loader worker " + std::to_string(who[i]) + " (pid " + std::to_string(w.pid) + ") died: " + how_it_ended(status);
      w.pid = -1, w.alive = false;
      *d = Done{};
      d->worker = static_cast<std::int32_t>(who[i]);
      d->status = Done::died;
      std::snprintf(d->message, sizeof d->message, "%s", why.c_str());
      return true;
    }
    return false;
  }

  void stop() override {
    for (auto& w : w_) {
      if (w.task_w >= 0) ::close(w.task_w), w.task_w = -1;
      if (w.pid > 0) {
        ::kill(w.pid, SIGKILL);
        while (::waitpid(w.pid, nullptr, 0) < 0 && errno == EINTR) {
        }
        untrack_child(w.pid);
        w.pid = -1;
      }
      if (w.done_r >= 0) ::close(w.done_r), w.done_r = -1;
      w.alive = false;
    }
  }

 private:
  struct W {
    pid_t pid = -1;
    int task_w = -1, done_r = -1;
    bool alive = false;
  };

  [[noreturn]] void fail_start(const char* what) {
    const int err = errno;
    stop();
    throw std::runtime_error(std::string("loader: cannot start ") + what + " for a worker: " + std::strerror(err));
  }

  [[noreturn]] static void worker_main(int k, pid_t parent, int task_r, int done_w, const Source& src, const MakerConfig& cfg,
                                       const SlotArena& slots, const Fault& fault) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the loader's thread gone (even by SIGKILL): so is the worker
    if (::getppid() != parent) ::_exit(0);
    ::signal(SIGINT, SIG_IGN);  // a terminal's Ctrl-C reaches the whole group: the loader decides
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGHUP, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    {
      BatchMaker maker(src, cfg);
      Task t;
      Done d;
      while (read_whole(task_r, &t, sizeof t)) {
        run_task(maker, slots, t, k, fault, true, &d);
        if (!write_whole(done_w, &d, sizeof d)) break;
      }
    }
    ::_exit(0);
  }

  std::vector<W> w_;
};

}  // namespace

std::unique_ptr<WorkerPool> start_process_workers(int n, const Source& src, const MakerConfig& cfg, const SlotArena& slots,
                                                  const Fault& fault) {
  return std::make_unique<ProcessWorkers>(n, src, cfg, slots, fault);
}

}  // namespace dlb::models::loader
