// Which kernel runs: the predicates and the per-thread dispatch of the three directions.
#include "kernels/cpu/conv2d/internal.h"

#include <cblas.h>
#include <algorithm>
#include <cstring>

namespace dlb::cpu {
using namespace detail;

namespace detail {
#ifdef DLB_DIRECT_KERNELS
bool cpu_has_avx2_fma() { return isa_allows(Isa::avx2); }  // under the DLB_CPU_ISA cap (isa.h)

constexpr int kDirectMaxK = 32;  // above this, a GEMM per image is deep enough

// With AVX-512 (DLB_CPU_ISA permitting) the direct kernels also beat im2col + sgemm above
// kDirectMaxK when K is a multiple of 16: 32 channels x 12 pixels per block (forward), 2 filter rows
// x 5 taps per dy vector (backward-filter). Measured on the lecture's conv1 (K = 128, C = 3): the
// im2col GEMM is only 75 deep there. (Backward-filter there: use_col_backward_filter.)
bool direct_wide_k(const Conv2dShape& sh) { return sh.k % 16 == 0 && isa_allows(Isa::avx512); }
bool use_col_backward_filter(const Conv2dShape& sh);

bool use_direct(const Conv2dShape& sh) {
  return sh.stride_h == 1 && sh.stride_w == 1 && sh.pad_h == 0 && sh.pad_w == 0 && sh.k % 8 == 0 &&
         sh.k <= kDirectMaxK && sh.c * sh.r * sh.s >= 64 && !is_pointwise(sh) && cpu_has_avx2_fma();
}

// Backward-filter for wide K and a shallow C*R*S (the lecture's conv1: K = 128, C*R*S = 75), where
// the per-tap kernel above streams a transposed dy once per 16 channels and tap pair, and im2col's
// sgemm is only C*R*S wide: our own GEMM with the pixels in the vector lanes instead
// (conv2d_backward_filter_col_avx512).
bool use_col_backward_filter(const Conv2dShape& sh) {
  return sh.stride_h == 1 && sh.stride_w == 1 && sh.pad_h == 0 && sh.pad_w == 0 && sh.k % 4 == 0 &&
         sh.k > kDirectMaxK && sh.c * sh.r * sh.s <= 256 && !is_pointwise(sh) && isa_allows(Isa::avx512);
}
// The same GEMM in AVX2 (conv2d_backward_filter_col_avx2), where the AVX-512 one does not run.
bool use_col_backward_filter_avx2(const Conv2dShape& sh) {
  return !use_col_backward_filter(sh) && sh.stride_h == 1 && sh.stride_w == 1 && sh.pad_h == 0 && sh.pad_w == 0 &&
         sh.k % 2 == 0 && sh.k > kDirectMaxK && sh.c * sh.r * sh.s <= 256 && !is_pointwise(sh) &&
         isa_allows(Isa::avx2);
}

// Forward for wide K over a shallow C*R*S (the lecture's conv1), any stride and padding: im2col
// and our own GEMM with the pixels in the vector lanes (conv2d_forward_col_avx512). Ahead of the direct
// kernel there, whose k-major blocks cost a scalar scatter of every output into NCHW.
bool use_col_forward(const Conv2dShape& sh) {
  return sh.k % 4 == 0 && sh.k > kDirectMaxK && sh.c * sh.r * sh.s <= 256 && !is_pointwise(sh) &&
         isa_allows(Isa::avx2);
}

// The forward kernel also takes padding. any_k: also above kDirectMaxK output channels (the
// backward-data of a conv with few output channels, run as a forward conv with rotated filters and
// "full" padding: ~50 GFLOP/s of useful work against ~38 for im2col there).
bool use_direct_forward(const Conv2dShape& sh, bool any_k) {
  return sh.stride_h == 1 && sh.stride_w == 1 && sh.k % 8 == 0 && (any_k || sh.k <= kDirectMaxK || direct_wide_k(sh)) &&
         sh.c * sh.r * sh.s >= 64 && !is_pointwise(sh) && cpu_has_avx2_fma();
}
#else
bool use_direct(const Conv2dShape&) { return false; }
bool use_col_forward(const Conv2dShape&) { return false; }
bool use_col_backward_filter(const Conv2dShape&) { return false; }
bool use_col_backward_filter_avx2(const Conv2dShape&) { return false; }
#endif

#ifdef DLB_DIRECT_KERNELS
// The own-GEMM forward (use_col_forward(sh)) in the widest ISA allowed.
void forward_col(const Conv2dShape& sh, const float* x, const float* w, const float* bias, float* y, float* col) {
  if (isa_allows(Isa::avx512)) return conv2d_forward_col_avx512(sh, x, w, bias, y, col);
  conv2d_forward_col_avx2(sh, x, w, bias, y, col);
}
#endif

// wt: the filters in CRSK order when use_direct(sh) (then the direct kernel runs), else null.
void forward_serial(const Conv2dShape& sh, const float* x, const float* w, const float* bias, float* y,
                    std::vector<float>& ws, const float* wt) {
#ifdef DLB_DIRECT_KERNELS
  if (!wt && use_col_forward(sh)) {  // (a launcher that passes CRSK filters chose the direct kernel)
    float* col = ensure_aligned(ws, std::size_t(sh.c) * sh.r * sh.s * sh.p() * sh.q());
    return forward_col(sh, x, w, bias, y, col);
  }
  if (wt) {
    const bool padded = sh.pad_h > 0 || sh.pad_w > 0;
    float* xpad = ensure_aligned(ws, padded ? std::size_t(sh.c) * (sh.h + 2 * sh.pad_h) * (sh.w + 2 * sh.pad_w) : 0);
    return conv2d_forward_direct_simd(sh, x, wt, bias, y, xpad);
  }
#endif
  const auto [K, CRS, PQ, pw, nb, col, ybuf] = im2col_plan(sh, ws);
  for (int i0 = 0; i0 < sh.n; i0 += nb) {
    const int m = std::min(nb, sh.n - i0);
    const float* xi = x + std::size_t(i0) * sh.c * sh.h * sh.w;
    float* yi = y + std::size_t(i0) * K * PQ;
    const float* b;
    if (pw) {
      b = xi;
    } else {
      im2col(sh, xi, m, col);
      b = col;
    }
    const std::size_t ncols = PQ * m;
    if (m == 1) {
      // One image: the GEMM writes y itself, onto the bias (beta = 1; OpenBLAS then skips its
      // separate pass that scales C by beta).
      if (bias)
        for (int k = 0; k < K; ++k) std::fill(yi + std::size_t(k) * PQ, yi + std::size_t(k + 1) * PQ, bias[k]);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, K, int(PQ), CRS, 1.0f, w, CRS, b, int(PQ),
                  bias ? 1.0f : 0.0f, yi, int(PQ));
      continue;
    }
    // [K x CRS] * [CRS x m*PQ] -> [K x m*PQ], then scattered to [m][K][PQ] (+ bias).
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, K, int(ncols), CRS, 1.0f, w, CRS, b, int(ncols), 0.0f,
                ybuf, int(ncols));
    for (int i = 0; i < m; ++i)
      for (int k = 0; k < K; ++k) {
        const float* src = ybuf + std::size_t(k) * ncols + i * PQ;
        float* dst = yi + (std::size_t(i) * K + k) * PQ;
        const float bk = bias ? bias[k] : 0.f;
        for (std::size_t j = 0; j < PQ; ++j) dst[j] = src[j] + bk;
      }
  }
}

// Backward-data as a forward convolution (stride 1 only): dx = conv(dy padded by r-1-pad, W
// rotated by 180 degrees with c and k swapped). Its GEMM is C x (K*R*S) x (H*W) per image instead
// of (C*R*S) x K x (P*Q): far better shaped when K is small (conv2: K = 16 makes the plain path a
// 16-deep GEMM that only writes a 3200-row dcol), at the price of multiplying the zero border
// (H*W / P*Q times the flops, <= 2.5x where we take it; not by conv2d_backward_data_cols_avx512).
bool backward_data_as_forward(const Conv2dShape& sh) {
  if (sh.stride_h != 1 || sh.stride_w != 1 || sh.pad_h > sh.r - 1 || sh.pad_w > sh.s - 1) return false;
  const double waste = double(sh.h) * sh.w / (double(sh.p()) * sh.q());
  return sh.k * 4 <= sh.c && waste <= 2.5;
}

// wrot: the rotated filters when backward_data_as_forward(sh), else null; when `crsk` (the direct
// kernels) blocked for conv2d_backward_data_cols_avx512 where use_cols_backward_data(sh), else in
// CRSK order; else KCRS.
void backward_data_serial(const Conv2dShape& sh, const float* dy, const float* w, float* dx, std::vector<float>& ws,
                          const float* wrot, bool crsk) {
  if (wrot && crsk && use_cols_backward_data(sh)) return backward_data_cols(sh, dy, wrot, dx, ws);
  if (wrot && crsk) return forward_serial(rotated_shape(sh), dy, nullptr, nullptr, dx, ws, wrot);
  if (wrot) return forward_serial(rotated_shape(sh), dy, wrot, nullptr, dx, ws);
  const auto [K, CRS, PQ, pw, nb, col, dybuf] = im2col_plan(sh, ws);
  for (int i0 = 0; i0 < sh.n; i0 += nb) {
    const int m = std::min(nb, sh.n - i0);
    const float* dyi = dy + std::size_t(i0) * K * PQ;
    float* dxi = dx + std::size_t(i0) * sh.c * sh.h * sh.w;
    const std::size_t ncols = PQ * m;
    const float* a = dyi;
    if (m > 1) {
      gather_images(dyi, m, K, PQ, dybuf);
      a = dybuf;
    }
    // [CRS x K] = W^T, times [K x m*PQ] -> dcol [CRS x m*PQ]
    float* out = pw ? dxi : col;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, CRS, int(ncols), K, 1.0f, w, CRS, a, int(ncols), 0.0f, out,
                int(ncols));
    if (!pw) col2im(sh, col, m, dxi);
  }
}

#ifdef DLB_DIRECT_KERNELS
// The own-GEMM backward-filter (use_col_backward_filter(sh) or its AVX2 twin), dy image by image.
void backward_filter_col(const Conv2dShape& sh, const float* x, const DyImage& dy_of, float* dw, float* db,
                         std::vector<float>& ws) {
  if (use_col_backward_filter(sh)) return conv2d_backward_filter_col_avx512(sh, x, dy_of, dw, db, ws);
  conv2d_backward_filter_col_avx2(sh, x, dy_of, dw, db, ws);
}
#endif

void backward_filter_serial(const Conv2dShape& sh, const float* x, const float* dy, float* dw, float* db,
                            std::vector<float>& ws) {
#ifdef DLB_DIRECT_KERNELS
  if (use_direct(sh)) {
    return conv2d_backward_filter_direct_avx2(sh, x, dy, dw, db, ensure_aligned(ws, sh.y_size()));
  }
  const std::size_t yi = std::size_t(sh.k) * sh.p() * sh.q();
  const DyImage dy_of = [&](int n) { return dy + n * yi; };
  if (use_col_backward_filter(sh) || use_col_backward_filter_avx2(sh)) return backward_filter_col(sh, x, dy_of, dw, db, ws);
#endif
  const auto [K, CRS, PQ, pw, nb, col, dybuf] = im2col_plan(sh, ws);
  if (db) std::fill(db, db + K, 0.f);
  for (int i0 = 0; i0 < sh.n; i0 += nb) {
    const int m = std::min(nb, sh.n - i0);
    const float* xi = x + std::size_t(i0) * sh.c * sh.h * sh.w;
    const float* dyi = dy + std::size_t(i0) * K * PQ;
    const std::size_t ncols = PQ * m;
    const float* a = dyi;
    if (m > 1) {
      gather_images(dyi, m, K, PQ, dybuf);
      a = dybuf;
    }
    if (db)
      for (int i = 0; i < m; ++i)
        for (int k = 0; k < K; ++k) db[k] += sum(dyi + (std::size_t(i) * K + k) * PQ, PQ);
    const float* b = xi;
    if (!pw) {
      im2col(sh, xi, m, col);
      b = col;
    }
    // dW [K x CRS] (+)= dY [K x m*PQ] * col^T [m*PQ x CRS]
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, K, CRS, int(ncols), 1.0f, a, int(ncols), b, int(ncols),
                i0 == 0 ? 0.0f : 1.0f, dw, CRS);
  }
}
}  // namespace detail

}  // namespace dlb::cpu
