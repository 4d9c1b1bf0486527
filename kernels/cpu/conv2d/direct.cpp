// Direct AVX2 / AVX-512 kernels: forward and backward-filter for few output channels, each one body
// over the vector width (direct_forward.inc, direct_backward_filter.inc) compiled once per ISA.
#include "kernels/cpu/conv2d/internal.h"
#include "kernels/cpu/simd.h"

#include <algorithm>

namespace dlb::cpu {
using namespace detail;

#ifdef DLB_DIRECT_KERNELS
namespace detail {

// ---------------------------------------------------------------------------------------------
// Fast paths: direct kernels for convolutions with few output channels (the lecture's conv2,
// 128 -> 16 channels 5x5). There im2col blows each image up R*S = 25 times (1.3 MB) only for a GEMM
// 16 rows deep, and the copy, not the FMAs, is the cost (docs/notes/2026-11-25-conv-cpu.md). These
// kernels read x in place: 8 or 16 output channels in one or two vector registers, times a run of up
// to 6 output pixels of one row, accumulated over c, r, s.
// Napkin math (forward, per tap): 2 filter loads + 6 broadcasts for 12 FMAs (192 flops), so the
// FMA ports, not the loads, set the pace. Backward-filter is the same loop with dy in the filter's
// place. Stride 1, no padding, k a multiple of 8, CPUs with AVX2 + FMA; other shapes use im2col.
// ---------------------------------------------------------------------------------------------
// wt[((c*R + r)*S + s)*K + k] = w[k][c][r][s]: one tap's K filter values are contiguous.
// (Written in order, read in K streams: each write a new cache line the other way round.)
void filters_to_crsk(const Conv2dShape& sh, const float* w, float* wt) {
  const std::size_t CRS = std::size_t(sh.c) * sh.r * sh.s;
  const int K = sh.k;
  for (std::size_t i = 0; i < CRS; ++i)
    for (int k = 0; k < K; ++k) wt[i * K + k] = w[k * CRS + i];
}

}  // namespace detail
// The forward kernel, once per ISA from one body (direct_forward.inc over simd.h's widths), as the
// sequence kernels are compiled (kernels/cpu/foreach_isa.h; the scalar pass is never called).
#define DLB_ISA_NAMESPACE detail  // inside dlb::cpu here
#define DLB_ISA_INCLUDE "kernels/cpu/conv2d/direct_forward.inc"
#include "kernels/cpu/foreach_isa.h"
// The backward-filter kernel likewise (direct_backward_filter.inc), into the same namespaces.
#define DLB_ISA_NAMESPACE detail
#define DLB_ISA_INCLUDE "kernels/cpu/conv2d/direct_backward_filter.inc"
#include "kernels/cpu/foreach_isa.h"
namespace detail {

// The forward direct kernel: AVX-512 (K % 16 == 0) or AVX2.
void forward_direct(const Conv2dShape& sh, const float* x, const float* wt, const float* bias, float* y, float* xpad,
                    bool w512) {
  if (w512) return avx512::forward_direct<simd::Avx512>(sh, x, wt, bias, y, xpad);
  avx2::forward_direct<simd::Avx2>(sh, x, wt, bias, y, xpad);
}

// The backward-filter kernel: AVX-512 (K % 16 == 0) or AVX2; hands the 16-channel blocks to the
// AVX-512 body when w512 (DLB_CPU_ISA allowing avx512). dyt: workspace of n*P*Q*K floats.
void backward_filter_direct(const Conv2dShape& sh, const float* x, const float* dy, float* dw, float* db, float* dyt,
                            bool w512) {
  if (w512) return avx512::backward_filter_direct(sh, x, dy, dw, db, dyt);
  avx2::backward_filter_direct(sh, x, dy, dw, db, dyt);
}
}  // namespace detail
#endif

}  // namespace dlb::cpu
