// build/bin/dlbench: the CLI entry point.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "harness/commands.h"
#include "kernels/common/child.h"
#include "kernels/common/errors.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/openblas_core.h"
#include "kernels/cpu/sgemm.h"
#include "kernels/cpu/threads.h"

// _Exit below skips LeakSanitizer's atexit check too: under ASan, run it by hand first.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DLB_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define DLB_ASAN 1
#endif
#ifdef DLB_ASAN
#include <sanitizer/lsan_interface.h>
#endif

// OpenBLAS starts its thread pool in its library constructor, before main, and when a thread cannot
// start (under `ulimit -v`, each thread's stack and arena need address space) it prints two lines and
// raises SIGINT, which ended dlbench with 130 as if the user had interrupted it. A .preinit_array
// function runs before any shared library's constructor: it catches that SIGINT and holds stderr in a
// memory file until the libraries are loaded, so main can say it in one line (exit 2), or replay
// what the libraries wrote when nothing went wrong.
namespace {
volatile std::sig_atomic_t g_sigint_before_main = 0;
int g_stderr_saved = -1, g_stderr_held = -1;
struct sigaction g_sigint_inherited {};

void on_sigint_before_main(int) { g_sigint_before_main = 1; }

void before_libraries() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint_before_main;
  sigaction(SIGINT, &sa, &g_sigint_inherited);
  g_stderr_held = memfd_create("dlbench-early-stderr", MFD_CLOEXEC);
  if (g_stderr_held >= 0) g_stderr_saved = fcntl(2, F_DUPFD_CLOEXEC, 3);
  if (g_stderr_saved < 0 || dup2(g_stderr_held, 2) < 0) g_stderr_saved = -1;
}
__attribute__((section(".preinit_array"), used)) void (*const g_before_libraries)() = before_libraries;

// The libraries are loaded: stderr back, SIGINT's inherited action back (the run installs its own
// handler). Returns false, having said why, when OpenBLAS could not start its threads.
bool after_libraries() {
  std::string early;
  if (g_stderr_saved >= 0) {
    dup2(g_stderr_saved, 2);
    close(g_stderr_saved);
    char buf[4096];
    for (off_t at = 0;;) {
      const ssize_t n = pread(g_stderr_held, buf, sizeof buf, at);
      if (n <= 0) break;
      early.append(buf, static_cast<std::size_t>(n));
      at += n;
    }
  }
  if (g_stderr_held >= 0) close(g_stderr_held);
  sigaction(SIGINT, &g_sigint_inherited, nullptr);  // e.g. ignored in a background job: stays so
  if (!g_sigint_before_main) {
    if (!early.empty()) (void)!write(2, early.data(), early.size());
    return true;
  }
  struct rlimit as {};
  std::string limit = "an address-space or thread limit";
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
    limit = "ulimit -v " + std::to_string(as.rlim_cur / 1024) + " KiB";
  std::fprintf(stderr,
               "dlbench: error: OpenBLAS could not start its threads under %s: raise the limit, or set "
               "OPENBLAS_NUM_THREADS=1\n",
               limit.c_str());
  return false;
}
}  // namespace

int main(int argc, char** argv) {
  if (!after_libraries()) std::_Exit(2);
  // Under `ulimit -f` a write past the limit raises SIGXFSZ, which kills without a word (exit 153):
  // ignored, the write fails with EFBIG and the writer says so in one line, its temporary file removed.
  std::signal(SIGXFSZ, SIG_IGN);
  dlb::die_with_parent_if_child();  // a probe started by a run ends with that run
  if (!dlb::harness::check_environment()) std::_Exit(2);  // before the re-exec below reads DLBENCH_OPENBLAS_CORE
  dlb::cpu::openblas_reexec_with_best_core(argc, argv);  // once, before any OpenBLAS work (openblas_core.h)
  dlb::cpu::hold_library_threads();                       // DLB_CPU_THREADS=1: OpenBLAS on one thread too
  try {  // DLB_CPU_ISA (kernels/cpu/isa.h), DLB_SGEMM (sgemm.h): a bad value is bad usage; a clamp is said once
    dlb::cpu::isa_cap();
    dlb::cpu::sgemm_lib();
  } catch (const dlb::UsageError& e) {
    std::fprintf(stderr, "dlbench: error: %s\n", e.what());
    std::_Exit(2);
  }
  if (!dlb::cpu::isa_note().empty()) std::fprintf(stderr, "dlbench: note: %s\n", dlb::cpu::isa_note().c_str());
  const int rc = dlb::harness::cli_main(argc, argv);
  // Leave without the libraries' exit handlers: under an address-space limit an OpenBLAS worker can be
  // stuck retrying the allocation of its buffer, and OpenBLAS's own shutdown would wait for it forever.
  // Everything of ours is written and closed by now (results files are closed with their writers).
  std::fflush(nullptr);
#ifdef DLB_ASAN
  __lsan_do_leak_check();  // exits with ASan's exit code on a leak
#endif
  std::_Exit(rc);
}
