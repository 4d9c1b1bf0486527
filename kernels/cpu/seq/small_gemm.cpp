// Small-M matrix product (see small_gemm.h): the fp64 reference, and the dispatch of tile_gemm.inc's
// register-tiled body (compiled per ISA) in row blocks, the columns split over the kernel threads.
#ifndef DLB_ISA_PASS
#include "kernels/cpu/seq/small_gemm.h"

#include <algorithm>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/seq/parallel.h"
#include "kernels/cpu/simd.h"

namespace dlb::cpu::seq {

void small_gemm_ref(bool trans_a, long m, long n, long k, const double* a, long lda, const double* b, long ldb,
                    bool accumulate, double* c, long ldc) {
  const long ars = trans_a ? 1 : lda, acs = trans_a ? lda : 1;
  for (long i = 0; i < m; ++i)
    for (long j = 0; j < n; ++j) {
      double s = accumulate ? c[i * ldc + j] : 0.0;
      for (long p = 0; p < k; ++p) s += a[i * ars + p * acs] * b[p * ldb + j];
      c[i * ldc + j] = s;
    }
}

}  // namespace dlb::cpu::seq

#define DLB_ISA_INCLUDE "kernels/cpu/seq/small_gemm.cpp"
#include "kernels/cpu/seq/foreach_isa.h"

namespace dlb::cpu::seq {

constexpr long kRowBlock = 128;

void small_gemm(bool trans_a, long m, long n, long k, const float* a, long lda, const float* b, long ldb,
                bool accumulate, float* c, long ldc) {
  if (m <= 0 || n <= 0) return;
  const long ars = trans_a ? 1 : lda, acs = trans_a ? lda : 1;  // A's element (i, p) at a[i ars + p acs]
  const auto body = DLB_ISA_PICK(small_gemm_cols);
  const long w = DLB_ISA_PICK(small_gemm_block_cols)();
  // Blocks of kRowBlock rows (their A, 64 KB at k = 128, stays in L2 while every column panel passes
  // over it; B's k x w panel stays in L1 while the block's rows pass over it), each split over the
  // threads by column panels.
  const long panels = (n + w - 1) / w;
  for (long i = 0; i < m; i += kRowBlock) {
    const long rows = std::min(kRowBlock, m - i);
    parallel_rows(panels, k * (w + rows), [&](long lo, long hi) {
      body(rows, lo * w, std::min(n, hi * w), k, a + i * ars, ars, acs, b, ldb, accumulate, c + i * ldc, ldc);
    });
  }
}

void small_gemm_serial(bool trans_a, long m, long n, long k, const float* a, long lda, const float* b, long ldb,
                       bool accumulate, float* c, long ldc) {
  if (m <= 0 || n <= 0) return;
  const long ars = trans_a ? 1 : lda, acs = trans_a ? lda : 1;
  const auto body = DLB_ISA_PICK(small_gemm_cols);
  for (long i = 0; i < m; i += kRowBlock)
    body(std::min(kRowBlock, m - i), 0, n, k, a + i * ars, ars, acs, b, ldb, accumulate, c + i * ldc, ldc);
}

}  // namespace dlb::cpu::seq

#else  // ---- bodies, once per ISA (foreach_isa.h) ----

#include "kernels/cpu/seq/tile_gemm.inc"  // mm

long small_gemm_block_cols() { return 2 * V::L; }  // mm's panel width

// Columns [j0, j1) of C, j0 a multiple of the panel width.
void small_gemm_cols(long m, long j0, long j1, long k, const float* a, long ars, long acs, const float* b, long ldb,
                     bool acc, float* c, long ldc) {
  mm(int(m), int(j1 - j0), int(k), a, ars, acs, b + j0, ldb, c + j0, ldc, acc);
}

#endif
