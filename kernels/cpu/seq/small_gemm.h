// C = op(A) B (+ C) with B small enough to stay in L2 (a recurrent layer's weights): the per-step
// products of an RNN/LSTM ([B x H] x [H x 4H] forward, [B x 4H] x [4H x H] backward), its
// whole-sequence input product and dx, and (A transposed) its weight gradients. fp32, row-major, every operand with its own leading
// dimension, B in [k x n] order (the caller transposes a weight once per sequence, not per step).
// Why not sgemm: OpenBLAS 0.3.21 packs B on every call, and at 8 x 512 x 128 (1 MFLOP, ~10 us at
// one core's rate) repacking the 256 KB of weights costs more than the arithmetic. Here A's
// elements are broadcast straight from memory and B's [k x 2 vectors] panel streams from L1/L2
// (tile_gemm.inc: per k, 2 loads of B and MR broadcasts feed 2 MR FMAs; MR 8 at AVX-512, 6 at AVX2).
#pragma once

namespace dlb::cpu::seq {

// The recurrent layers' per-step products go here from this many rows (rnn.cpp's dispatch): below
// 4 rows the 2 MR sums of a panel are too few to hide the FMA latency, and OpenBLAS's small-matrix
// path wins at B = 1, 2 (docs/notes/2026-11-26-seq-models.md, "Small-batch LSTM").
constexpr long kSmallGemmMinRows = 4;
// The weight gradients (dA^T [GH x T B] x [T B x I]) go here up to this k = T B. At T B = 2048
// (batch 64) one thread's product alone was OpenBLAS's, 63 vs 56 GF/s (2026-11-26), but the whole
// batch-64 LSTM / RNN step at two threads runs 1.21-1.40x faster with them here and within noise at
// one thread (0.94-1.02x; Zen 4, docs/notes/2026-11-27-audit.md). Beyond it, unmeasured: OpenBLAS.
constexpr long kSmallGemmMaxK = 2048;

// C[m x n] = op(A) B, or C += op(A) B with `accumulate`; op(A) = A [m x k], or with trans_a A^T
// for A [k x m]. Any sizes (tails masked). Columns are split over the kernel threads when the
// product is large enough to pay for it; the bits do not depend on the split.
void small_gemm(bool trans_a, long m, long n, long k, const float* a, long lda, const float* b, long ldb,
                bool accumulate, float* c, long ldc);
// The same product on the calling thread alone, for a caller that splits the work itself (the
// recurrence over batch rows: rnn.cpp). The same bits as small_gemm.
void small_gemm_serial(bool trans_a, long m, long n, long k, const float* a, long lda, const float* b, long ldb,
                       bool accumulate, float* c, long ldc);

// fp64 reference, same arguments.
void small_gemm_ref(bool trans_a, long m, long n, long k, const double* a, long lda, const double* b, long ldb,
                    bool accumulate, double* c, long ldc);

}  // namespace dlb::cpu::seq
