// Small-M matrix product (see small_gemm.h): the fp64 reference, a register-tiled body over the
// vector width, and the dispatch that splits the columns over the kernel threads.
#ifndef DLB_ISA_PASS
#include "kernels/cpu/seq/small_gemm.h"

#include <algorithm>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/seq/parallel.h"
#include "kernels/cpu/simd.h"

namespace dlb::cpu::seq {

void small_gemm_ref(long m, long n, long k, const double* a, long lda, const double* b, long ldb, bool accumulate,
                    double* c, long ldc) {
  for (long i = 0; i < m; ++i)
    for (long j = 0; j < n; ++j) {
      double s = accumulate ? c[i * ldc + j] : 0.0;
      for (long p = 0; p < k; ++p) s += a[i * lda + p] * b[p * ldb + j];
      c[i * ldc + j] = s;
    }
}

}  // namespace dlb::cpu::seq

#define DLB_ISA_INCLUDE "kernels/cpu/seq/small_gemm.cpp"
#include "kernels/cpu/seq/foreach_isa.h"

namespace dlb::cpu::seq {

constexpr long kRowBlock = 128;

void small_gemm(long m, long n, long k, const float* a, long lda, const float* b, long ldb, bool accumulate, float* c,
                long ldc) {
  if (m <= 0 || n <= 0) return;
  const auto body = DLB_ISA_PICK(small_gemm_cols);
  const long w = DLB_ISA_PICK(small_gemm_block_cols)();
  // Blocks of kRowBlock rows (their A, 64 KB at k = 128, stays in L2 while every column panel passes
  // over it), each split over the threads by column panels of w.
  const long panels = (n + w - 1) / w;
  for (long i = 0; i < m; i += kRowBlock) {
    const long rows = std::min(kRowBlock, m - i);
    parallel_rows(panels, k * (w + rows), [&](long lo, long hi) {
      body(rows, lo * w, std::min(n, hi * w), k, a + i * lda, lda, b, ldb, accumulate, c + i * ldc, ldc);
    });
  }
}

}  // namespace dlb::cpu::seq

#else  // ---- bodies, once per ISA (foreach_isa.h) ----

// Rows a panel holds in registers: MR x NV vectors of sums (16 of AVX-512's 32 registers, 8 of
// AVX2's 16), plus NV vectors of B and one broadcast.
constexpr int kMR = V::L >= 16 ? 8 : 4;
constexpr int kNV = 2;

long small_gemm_block_cols() { return kNV * V::L; }

// C rows [0, R), columns [0, NV L) (Masked: the first `lanes` lanes of one vector): the sums of k
// products in registers, then one store.
template <int R, int NV, bool Masked>
inline void small_gemm_tile(long k, const float* a, long lda, const float* b, long ldb, bool acc, float* c, long ldc,
                            int lanes) {
  vec s[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) s[r][v] = !acc ? V::zero() : Masked ? V::load_n(c + r * ldc, lanes, 0.f) : V::load(c + r * ldc + v * V::L);
  for (long p = 0; p < k; ++p) {
    vec bv[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) bv[v] = Masked ? V::load_n(b + p * ldb, lanes, 0.f) : V::load(b + p * ldb + v * V::L);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const vec av = V::bcast(a + r * lda + p);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) s[r][v] = V::fma(av, bv[v], s[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      if (Masked) V::store_n(c + r * ldc, s[r][v], lanes);
      else V::store(c + r * ldc + v * V::L, s[r][v]);
    }
}

// Rows [0, m) in blocks of kMR, columns [0, NV L) (Masked: NV 1, `lanes` of them).
template <int NV, bool Masked>
void small_gemm_panel(long m, long k, const float* a, long lda, const float* b, long ldb, bool acc, float* c, long ldc,
                      int lanes) {
  long i = 0;
  for (; i + kMR <= m; i += kMR) small_gemm_tile<kMR, NV, Masked>(k, a + i * lda, lda, b, ldb, acc, c + i * ldc, ldc, lanes);
  const float* ai = a + i * lda;
  float* ci = c + i * ldc;
  switch (m - i) {  // the last rows, fewer than kMR
    case 7: small_gemm_tile<7, NV, Masked>(k, ai, lda, b, ldb, acc, ci, ldc, lanes); break;
    case 6: small_gemm_tile<6, NV, Masked>(k, ai, lda, b, ldb, acc, ci, ldc, lanes); break;
    case 5: small_gemm_tile<5, NV, Masked>(k, ai, lda, b, ldb, acc, ci, ldc, lanes); break;
    case 4: small_gemm_tile<4, NV, Masked>(k, ai, lda, b, ldb, acc, ci, ldc, lanes); break;
    case 3: small_gemm_tile<3, NV, Masked>(k, ai, lda, b, ldb, acc, ci, ldc, lanes); break;
    case 2: small_gemm_tile<2, NV, Masked>(k, ai, lda, b, ldb, acc, ci, ldc, lanes); break;
    case 1: small_gemm_tile<1, NV, Masked>(k, ai, lda, b, ldb, acc, ci, ldc, lanes); break;
    default: break;
  }
}

// Columns [j0, j1) of C (j0 a multiple of kNV L): panels of kNV vectors (B's k x kNV L slice stays
// in L1 while every row block passes over it), then single vectors, then a masked tail.
void small_gemm_cols(long m, long j0, long j1, long k, const float* a, long lda, const float* b, long ldb, bool acc,
                     float* c, long ldc) {
  long j = j0;
  for (; j + kNV * V::L <= j1; j += kNV * V::L) small_gemm_panel<kNV, false>(m, k, a, lda, b + j, ldb, acc, c + j, ldc, V::L);
  for (; j + V::L <= j1; j += V::L) small_gemm_panel<1, false>(m, k, a, lda, b + j, ldb, acc, c + j, ldc, V::L);
  if (j < j1) small_gemm_panel<1, true>(m, k, a, lda, b + j, ldb, acc, c + j, ldc, int(j1 - j));
}

#endif
