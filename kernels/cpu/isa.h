// Which SIMD level our CPU kernels may use: what the CPU has, capped by DLB_CPU_ISA.
//   DLB_CPU_ISA=auto|scalar|avx2|avx512|avx512_bf16   (unset or auto: everything the CPU has)
// Levels are ordered; each includes the ones below it:
//   scalar       plain C++ (SSE2, the x86-64 baseline, as the compiler emits it)
//   avx2         AVX2 + FMA (+ F16C): our direct conv kernels, the AVX2 casts
//   avx512       AVX-512 F/BW/DQ/VL
//   avx512_bf16  + the bf16 dot-product instructions (vdpbf16ps): native bf16 GEMMs
// A cap above what the CPU has is clamped to the CPU, with a note (isa_note()) that the records and
// `dlbench info` carry. A bad value is a UsageError (exit 2). oneDNN is capped alongside
// (kernels/cpu/onednn/ passes isa_onednn_name() to dnnl::set_max_cpu_isa); OpenBLAS is not (its
// kernel set is chosen by kernels/cpu/openblas_core.h).
#pragma once
#include <string>

namespace dlb::cpu {

enum class Isa { scalar = 0, avx2 = 1, avx512 = 2, avx512_bf16 = 3 };

const char* isa_name(Isa i);
bool parse_isa(const std::string& s, Isa* out);  // the names above (not "auto")

Isa isa_detected();  // the highest level this CPU (and OS) runs
Isa isa_cap();       // DLB_CPU_ISA clamped to isa_detected(); throws UsageError on a bad value
std::string isa_note();  // "" or why the cap differs from DLB_CPU_ISA (clamped)
// The level our kernels use now: isa_cap(), lowered further while an IsaLimit is alive.
Isa isa_active();
inline bool isa_allows(Isa need) { return static_cast<int>(isa_active()) >= static_cast<int>(need); }

// oneDNN's name for a level (dnnl::cpu_isa / ONEDNN_MAX_CPU_ISA): SSE41, AVX2, AVX512_CORE,
// AVX512_CORE_BF16.
const char* isa_onednn_name(Isa i);

// RAII, process-wide: our kernels use at most `cap` (never above isa_cap()) while it lives. For
// tests that run every path in one process; not for concurrent use.
class IsaLimit {
 public:
  explicit IsaLimit(Isa cap);
  ~IsaLimit();
  IsaLimit(const IsaLimit&) = delete;
  IsaLimit& operator=(const IsaLimit&) = delete;

 private:
  int prev_;
};

}  // namespace dlb::cpu
