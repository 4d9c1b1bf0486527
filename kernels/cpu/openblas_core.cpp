// OpenBLAS core detection and the one-time re-exec (see openblas_core.h).
#include "kernels/cpu/openblas_core.h"

#include <strings.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

extern "C" char* openblas_get_corename(void);

namespace dlb::cpu {

namespace {
const char* kMarker = "DLBENCH_OPENBLAS_REEXEC";  // set in the re-exec'd process: the library's own core
const char* kChoice = "DLBENCH_OPENBLAS_CORE";    // "library" | "auto" | a core name

bool iequal(const std::string& a, const char* b) { return strcasecmp(a.c_str(), b) == 0; }

bool has(const std::set<std::string>& f, const char* flag) { return f.count(flag) > 0; }

// Highest tier the CPU can execute.
int cpu_tier(const std::set<std::string>& f) {
  if (has(f, "avx512f") && has(f, "avx512bw") && has(f, "avx512dq") && has(f, "avx512vl")) return 3;
  if (has(f, "avx2") && has(f, "fma")) return 2;
  if (has(f, "avx")) return 1;
  return 0;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}
}  // namespace

int openblas_core_tier(const std::string& core) {
  for (const char* c : {"SkylakeX", "Cooperlake", "SapphireRapids"})
    if (iequal(core, c)) return 3;
  for (const char* c : {"Haswell", "Zen", "Excavator"})
    if (iequal(core, c)) return 2;
  for (const char* c : {"Sandybridge", "Bulldozer", "Piledriver", "Steamroller"})
    if (iequal(core, c)) return 1;
  return 0;
}

bool openblas_core_runs_on(const std::set<std::string>& flags, const std::string& core) {
  const int tier = openblas_core_tier(core);
  if (tier == 0 || tier > cpu_tier(flags)) return false;
  if (iequal(core, "Excavator") && !(has(flags, "fma4") && has(flags, "xop"))) return false;
  return true;
}

CoreChoice choose_openblas_core(const std::set<std::string>& flags, const std::string& library_core) {
  const int have = cpu_tier(flags), lib = openblas_core_tier(library_core);
  CoreChoice c{library_core, false, ""};
  if (lib >= have) {
    c.reason = "library core " + library_core + " already uses the widest ISA this CPU has";
    return c;
  }
  // Cooperlake = SkylakeX kernels + sbgemm (bf16); same sgemm, so only worth it with avx512_bf16.
  if (have == 3) c.core = has(flags, "avx512_bf16") ? "Cooperlake" : "SkylakeX";
  else if (have == 2) c.core = "Haswell";
  else c.core = "Sandybridge";
  c.change = true;
  const char* isa = have == 3 ? "AVX-512" : have == 2 ? "AVX2+FMA" : "AVX";
  c.reason = "library picked " + library_core + " but the CPU has " + isa + ": using " + c.core;
  return c;
}

std::vector<std::string> openblas_sgemm_candidates(const std::set<std::string>& flags, const std::string& library_core) {
  std::vector<std::string> out;
  switch (cpu_tier(flags)) {
    case 3:
      out = {"SkylakeX"};
      if (has(flags, "avx512_bf16")) out.push_back("Cooperlake");
      if (has(flags, "amx_bf16") && has(flags, "avx512_fp16")) out.push_back("SapphireRapids");
      break;
    case 2:
      out = {"Haswell", "Zen"};
      // Excavator's kernels use AMD's FMA4/XOP, which Zen dropped (SIGILL there).
      if (has(flags, "fma4") && has(flags, "xop")) out.push_back("Excavator");
      break;
    case 1: out = {"Sandybridge"}; break;
    default: return out;
  }
  bool listed = library_core.empty();
  for (const auto& c : out) listed |= iequal(library_core, c.c_str());
  if (!listed && openblas_core_tier(library_core) > 0) out.push_back(library_core);
  return out;
}

std::set<std::string> read_cpu_flags() {
  std::set<std::string> out;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::string w;
    while (words >> w) out.insert(w);
    break;
  }
  return out;
}

std::string openblas_current_core() {
  const char* n = openblas_get_corename();
  return n ? n : "unknown";
}

CoreStatus openblas_core_status() {
  static const CoreStatus s = [] {
    CoreStatus st;
    st.core = openblas_current_core();
    const std::string marker = env(kMarker), choice = env(kChoice);
    if (!marker.empty()) {
      st.library_core = marker;
      const bool forced = !choice.empty() && !iequal(choice, "auto");
      st.mode = forced ? "forced" : "auto";
      st.reason = forced ? "DLBENCH_OPENBLAS_CORE=" + choice : choose_openblas_core(read_cpu_flags(), marker).reason;
      if (!iequal(st.core, st.library_core.c_str()) && openblas_core_tier(st.core) <= openblas_core_tier(marker))
        st.reason += " (but OpenBLAS runs " + st.core + ")";
    } else if (!env("OPENBLAS_CORETYPE").empty()) {
      st.mode = "forced";
      st.reason = "OPENBLAS_CORETYPE=" + env("OPENBLAS_CORETYPE");
    } else {
      st.library_core = st.core;
      st.mode = iequal(choice, "library") ? "library" : "auto";
      st.reason = st.mode == "library" ? "DLBENCH_OPENBLAS_CORE=library keeps the library's choice"
                                       : choose_openblas_core(read_cpu_flags(), st.core).reason;
    }
    return st;
  }();
  return s;
}

std::string openblas_core_env_problem() {
  const std::string choice = env(kChoice);
  if (choice.empty() || iequal(choice, "auto") || iequal(choice, "library")) return "";
  if (openblas_core_tier(choice) == 0)
    return "unknown core (expected auto, library or one of SkylakeX, Cooperlake, SapphireRapids, Haswell, Zen, "
           "Excavator, Sandybridge, Bulldozer, Piledriver, Steamroller)";
  if (!openblas_core_runs_on(read_cpu_flags(), choice)) return "this CPU cannot run that core's instructions";
  return "";
}

void openblas_reexec_with_best_core(int argc, char** argv) {
  (void)argc;
  if (!env(kMarker).empty() || !env("OPENBLAS_CORETYPE").empty()) return;  // done once / user's choice
  const std::string choice = env(kChoice), library = openblas_current_core();
  if (iequal(choice, "library")) return;
  CoreChoice c;
  if (!choice.empty() && !iequal(choice, "auto")) {
    if (!openblas_core_runs_on(read_cpu_flags(), choice)) {
      std::fprintf(stderr, "dlbench: DLBENCH_OPENBLAS_CORE=%s is not runnable or not known here; keeping %s\n",
                   choice.c_str(), library.c_str());
      return;
    }
    c = {choice, !iequal(choice, library.c_str()), "forced by DLBENCH_OPENBLAS_CORE"};
  } else {
    c = choose_openblas_core(read_cpu_flags(), library);
  }
  if (!c.change) return;
  setenv("OPENBLAS_CORETYPE", c.core.c_str(), 1);
  setenv(kMarker, library.c_str(), 1);
  execv("/proc/self/exe", argv);
  // exec failed: carry on with the library's core and say so.
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv(kMarker);
  std::fprintf(stderr, "dlbench: could not re-exec to use OpenBLAS core %s; running with %s\n", c.core.c_str(),
               library.c_str());
}

}  // namespace dlb::cpu
