// CPU sgemm implementations (see gemm.h).
#include "kernels/cpu/gemm.h"

#include <cblas.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/common/errors.h"
#include "kernels/cpu/openblas_core.h"

namespace dlb::cpu {

void sgemm_forward_openblas(const float* a, const float* b, float* c, long m, long n, long k) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), 1.0f, a, static_cast<blasint>(k), b, static_cast<blasint>(n), 0.0f, c,
              static_cast<blasint>(n));
}

// Blocks sized for a 32 KiB L1 / 512 KiB L2: a KC x NC panel of B (256 x 256 floats = 256 KiB)
// stays in L2 while MC rows of A stream through; the innermost j loop is contiguous in B and C,
// so the compiler vectorises it (8 floats per AVX2 FMA). Napkin: 2mnk flops, B re-read m/MC times.
// Cloned for AVX2+FMA and a baseline; the loader picks the clone this CPU runs.
__attribute__((target_clones("arch=haswell", "default")))
void sgemm_forward_blocked(const float* a, const float* b, float* c, long m, long n, long k) {
  constexpr long MC = 64, KC = 256, NC = 256;
  std::fill(c, c + static_cast<std::size_t>(m) * n, 0.0f);
  for (long j0 = 0; j0 < n; j0 += NC) {
    const long nc = std::min(NC, n - j0);
    for (long p0 = 0; p0 < k; p0 += KC) {
      const long kc = std::min(KC, k - p0);
      for (long i0 = 0; i0 < m; i0 += MC) {
        const long mc = std::min(MC, m - i0);
        for (long i = i0; i < i0 + mc; ++i) {
          float* __restrict ci = c + static_cast<std::size_t>(i) * n + j0;
          const float* ai = a + static_cast<std::size_t>(i) * k + p0;
          for (long p = 0; p < kc; ++p) {
            const float aip = ai[p];
            const float* __restrict bp = b + static_cast<std::size_t>(p0 + p) * n + j0;
            for (long j = 0; j < nc; ++j) ci[j] += aip * bp[j];
          }
        }
      }
    }
  }
}

namespace {
// cblas_sbgemm(order, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc), bfloat16 = 16 bits.
using sbgemm_fn = void (*)(int, int, int, blasint, blasint, blasint, float, const std::uint16_t*, blasint,
                           const std::uint16_t*, blasint, float, float*, blasint);
sbgemm_fn find_sbgemm() { return reinterpret_cast<sbgemm_fn>(dlsym(RTLD_DEFAULT, "cblas_sbgemm")); }
}  // namespace

void sbgemm_forward_openblas(const std::uint16_t* a, const std::uint16_t* b, float* c, long m, long n, long k) {
  static const sbgemm_fn f = find_sbgemm();
  if (!f) throw Unsupported("OpenBLAS has no cblas_sbgemm (built without BUILD_BFLOAT16)");
  f(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(m), static_cast<blasint>(n),
    static_cast<blasint>(k), 1.0f, a, static_cast<blasint>(k), b, static_cast<blasint>(n), 0.0f, c,
    static_cast<blasint>(n));
}

bool openblas_has_sbgemm() { return find_sbgemm() != nullptr; }

std::string cpu_bf16_gemm_unsupported_reason() {
  const auto flags = read_cpu_flags();
  const bool isa = flags.count("avx512_bf16") > 0;
  // Looked up at run time: Debian's OpenBLAS is built without BUILD_BFLOAT16 and has no sbgemm.
  const bool lib = find_sbgemm() != nullptr;
  if (isa && lib) return "";
  std::string why;
  if (!isa) why = "CPU has no avx512_bf16";
  if (!lib) why += std::string(why.empty() ? "" : "; ") + "OpenBLAS " + "has no cblas_sbgemm (built without BUILD_BFLOAT16)";
  return why;
}

}  // namespace dlb::cpu
