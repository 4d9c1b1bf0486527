// Backward-data as a forward conv over rotated filters, and the "cols" kernels that run it over dy's
// columns without the zero border (one body over the vector width: bwd_data_cols.inc).
#include "kernels/cpu/conv2d/internal.h"
#include "kernels/cpu/simd.h"

#include <algorithm>

namespace dlb::cpu {
using namespace detail;

namespace detail {
// The convolution that backward_data_as_forward runs instead: input dy, output dx.
Conv2dShape rotated_shape(const Conv2dShape& sh) {
  Conv2dShape t;
  t.n = sh.n, t.c = sh.k, t.h = sh.p(), t.w = sh.q(), t.k = sh.c, t.r = sh.r, t.s = sh.s;
  t.pad_h = sh.r - 1 - sh.pad_h, t.pad_w = sh.s - 1 - sh.pad_w;
  return t;
}

// Its filters: W'[c][k][R-1-r][S-1-s] = W[k][c][r][s] (wt holds w_size() floats).
void rotate_filters(const Conv2dShape& sh, const float* w, float* wt) {
  const int RS = sh.r * sh.s;
  for (int k = 0; k < sh.k; ++k)
    for (int c = 0; c < sh.c; ++c) {
      const float* src = w + (std::size_t(k) * sh.c + c) * RS;
      float* dst = wt + (std::size_t(c) * sh.k + k) * RS;
      for (int i = 0; i < RS; ++i) dst[RS - 1 - i] = src[i];
    }
}

// The rotated filters in the CRSK order of the direct kernel: wt[((k*R + r)*S + s)*C + c] =
// W[k][c][R-1-r][S-1-s] (the rotated conv's input channels are our k, its outputs our c).
void rotate_filters_crsk(const Conv2dShape& sh, const float* w, float* wt) {
  const int R = sh.r, S = sh.s, C = sh.c, RS = R * S;
  for (int k = 0; k < sh.k; ++k)
    for (int t = 0; t < RS; ++t) {  // written in order; tap t reads tap RS-1-t of every channel
      const float* src = w + std::size_t(k) * C * RS + (RS - 1 - t);
      float* dst = wt + (std::size_t(k) * RS + t) * C;
      for (int c = 0; c < C; ++c) dst[c] = src[std::size_t(c) * RS];
    }
}

}  // namespace detail

#ifdef DLB_DIRECT_KERNELS
// The cols kernels, once per ISA from one body (bwd_data_cols.inc over simd.h's widths), as the
// direct forward kernel is compiled (kernels/cpu/foreach_isa.h; the scalar pass is never called).
#define DLB_ISA_NAMESPACE detail  // inside dlb::cpu here
#define DLB_ISA_INCLUDE "kernels/cpu/conv2d/bwd_data_cols.inc"
#include "kernels/cpu/foreach_isa.h"
namespace detail {

// The width is the row's (algos.cpp: bwd_data_cols_avx512 / _avx2, filters rot_cols16 / rot_cols8),
// not isa_active()'s: the AVX2 row also runs where AVX-512 is allowed. w512: 16-channel vectors in
// blocks of 32 channels; else 8 in blocks of 16.
void rotate_filters_cols(const Conv2dShape& sh, const float* w, float* wt, bool w512) {
  if (w512) return avx512::rotate_filters_cols<simd::Avx512>(sh, w, wt);
  avx2::rotate_filters_cols<simd::Avx2>(sh, w, wt);
}
void backward_data_cols(const Conv2dShape& sh, const float* dy, const float* wt, float* dx, std::vector<float>& ws,
                        bool w512) {
  if (w512) return avx512::backward_data_cols<simd::Avx512>(sh, dy, wt, dx, ws);
  avx2::backward_data_cols<simd::Avx2>(sh, dy, wt, dx, ws);
}
}  // namespace detail
#endif

}  // namespace dlb::cpu
