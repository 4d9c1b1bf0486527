// ISA detection and the DLB_CPU_ISA cap (see isa.h).
#include "kernels/cpu/isa.h"

#include <atomic>
#include <cstdlib>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "kernels/common/errors.h"

namespace dlb::cpu {

namespace {

constexpr const char* kNames[] = {"scalar", "avx2", "avx512", "avx512_bf16"};

Isa detect() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) return Isa::scalar;
  // __builtin_cpu_supports reports AVX-512 only when the OS saves the zmm state.
  if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")))
    return Isa::avx2;
  unsigned a = 0, b = 0, c = 0, d = 0;  // CPUID.(EAX=7, ECX=1):EAX bit 5 = AVX512_BF16
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5))) return Isa::avx512_bf16;
  return Isa::avx512;
#else
  return Isa::scalar;
#endif
}

struct Cap {
  Isa level = Isa::scalar;
  std::string note, error;
};

Cap read_cap() {
  Cap c;
  const Isa have = detect();
  c.level = have;
  const char* e = std::getenv("DLB_CPU_ISA");
  if (!e || !*e || std::string(e) == "auto") return c;
  Isa want;
  if (!parse_isa(e, &want)) {
    c.error = std::string("DLB_CPU_ISA=") + e + ": expected auto, scalar, avx2, avx512 or avx512_bf16";
    return c;
  }
  if (static_cast<int>(want) > static_cast<int>(have)) {
    c.note = std::string("DLB_CPU_ISA=") + e + " clamped to " + isa_name(have) + ": this CPU has no " + e;
    return c;
  }
  c.level = want;
  return c;
}

const Cap& cap() {
  static const Cap c = read_cap();
  return c;
}

std::atomic<int> g_limit{-1};  // IsaLimit's level (-1: none)

}  // namespace

const char* isa_name(Isa i) { return kNames[static_cast<int>(i)]; }

bool parse_isa(const std::string& s, Isa* out) {
  for (int i = 0; i < 4; ++i)
    if (s == kNames[i]) return *out = static_cast<Isa>(i), true;
  return false;
}

Isa isa_detected() {
  static const Isa v = detect();
  return v;
}

Isa isa_cap() {
  if (!cap().error.empty()) throw UsageError(cap().error);
  return cap().level;
}

std::string isa_note() { return cap().note; }

Isa isa_active() {
  const int lim = g_limit.load(std::memory_order_relaxed);
  const Isa c = isa_cap();
  return lim >= 0 && lim < static_cast<int>(c) ? static_cast<Isa>(lim) : c;
}

const char* isa_onednn_name(Isa i) {
  switch (i) {
    case Isa::scalar: return "SSE41";
    case Isa::avx2: return "AVX2";
    case Isa::avx512: return "AVX512_CORE";
    default: return "AVX512_CORE_BF16";
  }
}

IsaLimit::IsaLimit(Isa c) : prev_(g_limit.exchange(static_cast<int>(c))) {}
IsaLimit::~IsaLimit() { g_limit.store(prev_); }

}  // namespace dlb::cpu
