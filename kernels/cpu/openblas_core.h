// Which OpenBLAS kernel set ("core") runs our sgemm, and choosing a better one than the library's.
// A DYNAMIC_ARCH OpenBLAS picks its core by CPU model when it is loaded and can pick a weak one
// (e.g. AVX2 "Haswell" on an AVX-512 Zen 5). It reads OPENBLAS_CORETYPE only at load time, so the
// fix is to re-exec the process once, early in main(), with that variable set.
//   DLBENCH_OPENBLAS_CORE=library   keep the library's own choice
//   DLBENCH_OPENBLAS_CORE=<Core>    force a core (e.g. SkylakeX); an explicit OPENBLAS_CORETYPE wins too
#pragma once
#include <set>
#include <string>
#include <vector>

namespace dlb::cpu {

// ISA tiers of OpenBLAS x86-64 cores for sgemm: 3 = AVX-512 (SkylakeX, Cooperlake,
// SapphireRapids), 2 = AVX2+FMA (Haswell, Zen, Excavator), 1 = AVX (Sandybridge, Bulldozer...),
// 0 = older or unknown.
int openblas_core_tier(const std::string& core);

struct CoreChoice {
  std::string core;    // core to run with (== library_core when nothing better exists)
  bool change = false; // true: re-exec with OPENBLAS_CORETYPE=core
  std::string reason;  // one line, for logs and records
};

// Pure: whether a CPU with these flags executes every instruction of `core`'s kernels (false for an
// unknown core). Excavator needs AMD's FMA4 and XOP besides AVX2.
bool openblas_core_runs_on(const std::set<std::string>& cpu_flags, const std::string& core);

// Pure: CPU flags (as in /proc/cpuinfo, lower case) and the library's chosen core -> best core.
// Never picks a core whose instructions the CPU lacks; never downgrades the library's choice.
CoreChoice choose_openblas_core(const std::set<std::string>& cpu_flags, const std::string& library_core);

// The cores worth timing against each other for sgemm on a CPU with these flags: every core of the
// widest ISA tier the CPU executes (Cooperlake only with avx512_bf16, SapphireRapids only with
// amx_bf16 and avx512_fp16, Excavator only with FMA4 and XOP), then `library_core` when it is not among them (the library's own pick,
// e.g. Haswell on an AVX-512 CPU). Empty when the CPU has no AVX.
std::vector<std::string> openblas_sgemm_candidates(const std::set<std::string>& cpu_flags, const std::string& library_core);

// Flags of the first CPU in /proc/cpuinfo (empty when unreadable).
std::set<std::string> read_cpu_flags();

// The core OpenBLAS is running with now (openblas_get_corename()).
std::string openblas_current_core();

// What happened at start-up: the library's own choice, the core in use and why.
struct CoreStatus {
  std::string library_core;  // what OpenBLAS picked by itself ("" when unknown: user forced it)
  std::string core;          // what runs now
  std::string mode;          // "auto", "library" or "forced"
  std::string reason;
};
CoreStatus openblas_core_status();

// Call first thing in main(). When a better core exists (and DLBENCH_OPENBLAS_CORE is not
// "library", and OPENBLAS_CORETYPE is not set by the user), re-execs /proc/self/exe with
// OPENBLAS_CORETYPE set and the marker DLBENCH_OPENBLAS_REEXEC=<library core>; returns normally
// otherwise (also when exec fails: the run goes on with the library's core).
void openblas_reexec_with_best_core(int argc, char** argv);

// What is wrong with $DLBENCH_OPENBLAS_CORE ("" when unset, auto, library, or a core this CPU runs).
std::string openblas_core_env_problem();

}  // namespace dlb::cpu
