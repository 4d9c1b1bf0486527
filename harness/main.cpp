// build/bin/dlbench: the CLI entry point.
#include <cstdio>

#include "harness/commands.h"
#include "kernels/common/errors.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/openblas_core.h"

int main(int argc, char** argv) {
  dlb::cpu::openblas_reexec_with_best_core(argc, argv);  // once, before any OpenBLAS work (openblas_core.h)
  try {  // DLB_CPU_ISA (kernels/cpu/isa.h): a bad value is bad usage; a clamp is said once
    dlb::cpu::isa_cap();
  } catch (const dlb::UsageError& e) {
    std::fprintf(stderr, "dlbench: error: %s\n", e.what());
    return 2;
  }
  if (!dlb::cpu::isa_note().empty()) std::fprintf(stderr, "dlbench: note: %s\n", dlb::cpu::isa_note().c_str());
  return dlb::harness::cli_main(argc, argv);
}
