// build/bin/dlbench: the CLI entry point.
#include "harness/commands.h"
#include "kernels/common/child.h"
#include "kernels/cpu/openblas_core.h"

int main(int argc, char** argv) {
  dlb::die_with_parent_if_child();  // a probe started by a run ends with that run
  dlb::cpu::openblas_reexec_with_best_core(argc, argv);  // once, before any OpenBLAS work (openblas_core.h)
  return dlb::harness::cli_main(argc, argv);
}
