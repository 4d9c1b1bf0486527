// build/bin/dlbench: the CLI entry point.
#include "harness/commands.h"
#include "kernels/cpu/openblas_core.h"

int main(int argc, char** argv) {
  if (!dlb::harness::check_environment()) return 2;  // before the re-exec below reads DLBENCH_OPENBLAS_CORE
  dlb::cpu::openblas_reexec_with_best_core(argc, argv);  // once, before any OpenBLAS work (openblas_core.h)
  return dlb::harness::cli_main(argc, argv);
}
