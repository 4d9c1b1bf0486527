// build/bin/dlbench: the CLI entry point.
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "harness/commands.h"
#include "kernels/common/child.h"
#include "kernels/common/errors.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/openblas_core.h"

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

int main(int argc, char** argv) {
  // Under `ulimit -f` a write past the limit raises SIGXFSZ, which kills without a word (exit 153):
  // ignored, the write fails with EFBIG and the writer says so in one line, its temporary file removed.
  std::signal(SIGXFSZ, SIG_IGN);
  dlb::die_with_parent_if_child();  // a probe started by a run ends with that run
  if (!dlb::harness::check_environment()) std::_Exit(2);  // before the re-exec below reads DLBENCH_OPENBLAS_CORE
  dlb::cpu::openblas_reexec_with_best_core(argc, argv);  // once, before any OpenBLAS work (openblas_core.h)
  try {  // DLB_CPU_ISA (kernels/cpu/isa.h): a bad value is bad usage; a clamp is said once
    dlb::cpu::isa_cap();
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
