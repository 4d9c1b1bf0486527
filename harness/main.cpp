// build/bin/dlbench: the CLI entry point.
#include <cstdio>
#include <cstdlib>

#include "harness/commands.h"
#include "kernels/common/child.h"
#include "kernels/cpu/openblas_core.h"

int main(int argc, char** argv) {
  dlb::die_with_parent_if_child();  // a probe started by a run ends with that run
  if (!dlb::harness::check_environment()) std::_Exit(2);  // before the re-exec below reads DLBENCH_OPENBLAS_CORE
  dlb::cpu::openblas_reexec_with_best_core(argc, argv);  // once, before any OpenBLAS work (openblas_core.h)
  const int rc = dlb::harness::cli_main(argc, argv);
  // Leave without the libraries' exit handlers: under an address-space limit an OpenBLAS worker can be
  // stuck retrying the allocation of its buffer, and OpenBLAS's own shutdown would wait for it forever.
  // Everything of ours is written and closed by now (results files are closed with their writers).
  std::fflush(nullptr);
  std::_Exit(rc);
}
