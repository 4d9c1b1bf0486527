// A real child process that holds `bytes` of anonymous memory (touched, so resident) until this
// object goes: what a peer's Python looks like to the harness's memory meters (harness/meters.h).
#pragma once
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <stdexcept>

namespace dlb::test {

class ChildHolding {
 public:
  explicit ChildHolding(std::size_t bytes) {
    int fd[2];
    if (pipe(fd) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ < 0) {
      close(fd[0]), close(fd[1]);
      throw std::runtime_error("fork");
    }
    if (pid_ == 0) {  // the child: only async-signal-safe calls from here on
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p != MAP_FAILED) std::memset(p, 1, bytes);
      (void)!write(fd[1], p != MAP_FAILED ? "y" : "n", 1);
      for (;;) pause();
    }
    close(fd[1]);  // (so a child that dies before its write ends the read)
    char c = 0;
    (void)!read(fd[0], &c, 1);  // returns once the bytes are resident
    close(fd[0]);
    if (c != 'y') {
      stop();
      throw std::runtime_error("the child could not map its memory");
    }
  }
  ~ChildHolding() { stop(); }
  ChildHolding(const ChildHolding&) = delete;
  ChildHolding& operator=(const ChildHolding&) = delete;

 private:
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  pid_t pid_ = -1;
};

}  // namespace dlb::test
