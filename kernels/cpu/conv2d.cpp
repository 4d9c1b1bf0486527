// Conv2d on the CPU (declared in conv2d.h): the direct reference in fp64, then the fast im2col +
// OpenBLAS sgemm paths for forward, backward-data and backward-filter.
//
// Napkin math (lecture conv1 at batch 64: n64 c3 32x32 k128 5x5 -> 28x28):
//   flops = 2*n*k*p*q*c*r*s = 2*64*128*784*75 = 0.96 GFLOP per direction;
//   a whole-batch im2col buffer would be c*r*s x n*p*q floats = 75 x 50176 = 15 MB, so forward and
//   backward-data work in cache-sized chunks (~1 MB of im2col, see chunk_images).
// The GEMM is the whole cost when c*r*s is large; for conv1 (c*r*s = 75) the im2col copy and the
// NCHW scatter are a visible part, so they are written as contiguous row copies. For conv2
// (128 -> 16 channels) im2col blows the input up 16x; backward-data there runs as a forward conv
// with rotated filters instead (backward_data_as_forward).
//
// Fast-path layout: the batch is processed in chunks of `nb` images, and one GEMM covers the whole
// chunk (GEMM N = nb*p*q), which is what makes small layers (conv2: 16 x 3200 x 100 per image) fast:
//   col   [c*r*s][nb*p*q]   column index = image*p*q + output pixel
//   ybuf  [k][nb*p*q]       the GEMM output, scattered to NCHW afterwards (+ bias)
// When nb == 1 the GEMM writes straight into y / reads straight from dy.
#include "kernels/cpu/conv2d.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <sstream>

#include "kernels/common/errors.h"
#include "kernels/cpu/threads.h"

namespace dlb {

bool Conv2dShape::valid() const {
  if (n < 1 || c < 1 || h < 1 || w < 1 || k < 1 || r < 1 || s < 1) return false;
  if (pad_h < 0 || pad_w < 0 || stride_h < 1 || stride_w < 1) return false;
  if (h + 2 * pad_h < r || w + 2 * pad_w < s) return false;  // output would be < 1x1
  return p() >= 1 && q() >= 1;
}

std::string Conv2dShape::str() const {
  std::ostringstream o;
  o << "n" << n << "_c" << c << "_h" << h << "_w" << w << "_k" << k << "_r" << r << "_s" << s << "_p" << pad_h;
  if (pad_w != pad_h) o << "x" << pad_w;
  o << "_u" << stride_h;
  if (stride_w != stride_h) o << "x" << stride_w;
  return o.str();
}

namespace cpu {
namespace {

void check_shape(const Conv2dShape& sh) {
  if (!sh.valid()) throw UsageError("conv2d: invalid shape " + sh.str());
}

// ---------------------------------------------------------------------------------------------
// Reference: direct loops, fp64 accumulation.
// ---------------------------------------------------------------------------------------------
}  // namespace

// Single elements, in gather form: output index `idx` (NCHW / NCHW / KCRS order) in fp64. The
// backward ones gather what the scatter-form references below add up, so a sampled check computes its
// reference a second, independent way.
double conv2d_forward_direct_at(const Conv2dShape& sh, const float* x, const float* w, std::size_t idx) {
  const int P = sh.p(), Q = sh.q();
  const int q = int(idx % Q), p = int(idx / Q % P), k = int(idx / (std::size_t(P) * Q) % sh.k);
  const int n = int(idx / (std::size_t(P) * Q * sh.k));
  double acc = 0;
  for (int c = 0; c < sh.c; ++c)
    for (int r = 0; r < sh.r; ++r) {
      const int ih = p * sh.stride_h - sh.pad_h + r;
      if (ih < 0 || ih >= sh.h) continue;
      for (int s = 0; s < sh.s; ++s) {
        const int iw = q * sh.stride_w - sh.pad_w + s;
        if (iw < 0 || iw >= sh.w) continue;
        acc += double(x[((std::size_t(n) * sh.c + c) * sh.h + ih) * sh.w + iw]) *
               double(w[((std::size_t(k) * sh.c + c) * sh.r + r) * sh.s + s]);
      }
    }
  return acc;
}

double conv2d_backward_data_direct_at(const Conv2dShape& sh, const float* dy, const float* w, std::size_t idx) {
  const int P = sh.p(), Q = sh.q();
  const int iw = int(idx % sh.w), ih = int(idx / sh.w % sh.h), c = int(idx / (std::size_t(sh.h) * sh.w) % sh.c);
  const int n = int(idx / (std::size_t(sh.h) * sh.w * sh.c));
  double acc = 0;
  for (int r = 0; r < sh.r; ++r) {
    const int t = ih + sh.pad_h - r;  // = p * stride
    if (t < 0 || t % sh.stride_h) continue;
    const int p = t / sh.stride_h;
    if (p >= P) continue;
    for (int s = 0; s < sh.s; ++s) {
      const int u = iw + sh.pad_w - s;
      if (u < 0 || u % sh.stride_w) continue;
      const int q = u / sh.stride_w;
      if (q >= Q) continue;
      for (int k = 0; k < sh.k; ++k)
        acc += double(dy[((std::size_t(n) * sh.k + k) * P + p) * Q + q]) *
               double(w[((std::size_t(k) * sh.c + c) * sh.r + r) * sh.s + s]);
    }
  }
  return acc;
}

double conv2d_backward_filter_direct_at(const Conv2dShape& sh, const float* x, const float* dy, std::size_t idx) {
  const int P = sh.p(), Q = sh.q();
  const int s = int(idx % sh.s), r = int(idx / sh.s % sh.r), c = int(idx / (std::size_t(sh.r) * sh.s) % sh.c);
  const int k = int(idx / (std::size_t(sh.r) * sh.s * sh.c));
  double acc = 0;
  for (int n = 0; n < sh.n; ++n)
    for (int p = 0; p < P; ++p) {
      const int ih = p * sh.stride_h - sh.pad_h + r;
      if (ih < 0 || ih >= sh.h) continue;
      for (int q = 0; q < Q; ++q) {
        const int iw = q * sh.stride_w - sh.pad_w + s;
        if (iw < 0 || iw >= sh.w) continue;
        acc += double(dy[((std::size_t(n) * sh.k + k) * P + p) * Q + q]) *
               double(x[((std::size_t(n) * sh.c + c) * sh.h + ih) * sh.w + iw]);
      }
    }
  return acc;
}

void conv2d_forward_direct(const Conv2dShape& sh, const float* x, const float* w, const float* bias, double* y) {
  check_shape(sh);
  const std::size_t PQ = std::size_t(sh.p()) * sh.q();
  for (std::size_t i = 0; i < sh.y_size(); ++i)
    y[i] = conv2d_forward_direct_at(sh, x, w, i) + (bias ? bias[i / PQ % sh.k] : 0.0);
}

void conv2d_backward_data_direct(const Conv2dShape& sh, const float* dy, const float* w, double* dx) {
  check_shape(sh);
  const int P = sh.p(), Q = sh.q();
  std::fill(dx, dx + sh.x_size(), 0.0);
  for (int n = 0; n < sh.n; ++n)
    for (int k = 0; k < sh.k; ++k)
      for (int p = 0; p < P; ++p)
        for (int q = 0; q < Q; ++q) {
          const double g = dy[((std::size_t(n) * sh.k + k) * P + p) * Q + q];
          for (int c = 0; c < sh.c; ++c)
            for (int r = 0; r < sh.r; ++r) {
              const int ih = p * sh.stride_h - sh.pad_h + r;
              if (ih < 0 || ih >= sh.h) continue;
              for (int s = 0; s < sh.s; ++s) {
                const int iw = q * sh.stride_w - sh.pad_w + s;
                if (iw < 0 || iw >= sh.w) continue;
                dx[((std::size_t(n) * sh.c + c) * sh.h + ih) * sh.w + iw] +=
                    g * double(w[((std::size_t(k) * sh.c + c) * sh.r + r) * sh.s + s]);
              }
            }
        }
}

void conv2d_backward_filter_direct(const Conv2dShape& sh, const float* x, const float* dy, double* dw, double* db) {
  check_shape(sh);
  const int P = sh.p(), Q = sh.q();
  std::fill(dw, dw + sh.w_size(), 0.0);
  if (db) std::fill(db, db + sh.k, 0.0);
  for (int n = 0; n < sh.n; ++n)
    for (int k = 0; k < sh.k; ++k)
      for (int p = 0; p < P; ++p)
        for (int q = 0; q < Q; ++q) {
          const double g = dy[((std::size_t(n) * sh.k + k) * P + p) * Q + q];
          if (db) db[k] += g;
          for (int c = 0; c < sh.c; ++c)
            for (int r = 0; r < sh.r; ++r) {
              const int ih = p * sh.stride_h - sh.pad_h + r;
              if (ih < 0 || ih >= sh.h) continue;
              for (int s = 0; s < sh.s; ++s) {
                const int iw = q * sh.stride_w - sh.pad_w + s;
                if (iw < 0 || iw >= sh.w) continue;
                dw[((std::size_t(k) * sh.c + c) * sh.r + r) * sh.s + s] +=
                    g * double(x[((std::size_t(n) * sh.c + c) * sh.h + ih) * sh.w + iw]);
              }
            }
        }
}

// ---------------------------------------------------------------------------------------------
// Fast paths: im2col + sgemm over a chunk of images.
// ---------------------------------------------------------------------------------------------
namespace {

// Images per GEMM. Forward and backward-data: the im2col chunk should stay cache-sized (about
// 1 MB: written by im2col / the GEMM and consumed while still in L2/L3; a whole-batch 15 MB buffer
// for conv1 at batch 64 ran at half the speed of 4-image chunks), but the GEMM needs enough columns
// (>= 512) to run near peak (conv2 has only 100 output pixels per image). Backward-filter reduces
// over the batch inside the GEMM (its K dimension), so one big GEMM beats many small ones that each
// synchronise OpenBLAS's threads and re-write dW. kMaxColFloats bounds the workspace in every case.
constexpr std::size_t kTargetColFloats = std::size_t(256) << 10;  // 1 MiB
constexpr std::size_t kMinGemmCols = 512;
constexpr std::size_t kMaxColFloats = std::size_t(16) << 20;  // 64 MiB hard cap (>= 1 image always)

int chunk_images(const Conv2dShape& sh, std::size_t target = kTargetColFloats) {
  const std::size_t pq = std::size_t(sh.p()) * sh.q();
  const std::size_t per_image = std::size_t(sh.c) * sh.r * sh.s * pq;
  std::size_t nb = std::max<std::size_t>(1, target / per_image);
  nb = std::max(nb, (kMinGemmCols + pq - 1) / pq);
  nb = std::min(nb, std::max<std::size_t>(1, kMaxColFloats / per_image));
  return int(std::min<std::size_t>(nb, std::size_t(sh.n)));
}

void ensure(std::vector<float>& ws, std::size_t n) {
  if (ws.size() >= n) return;
  try {
    ws.resize(n);
  } catch (const std::bad_alloc&) {
    throw OutOfMemory("conv2d workspace of " + std::to_string(n * sizeof(float)) + " bytes");
  }
}

// 1x1 filter, stride 1, no padding: the image itself is the im2col matrix.
bool is_pointwise(const Conv2dShape& sh) {
  return sh.r == 1 && sh.s == 1 && sh.stride_h == 1 && sh.stride_w == 1 && sh.pad_h == 0 && sh.pad_w == 0;
}

// Valid output range [lo, hi) along one axis for filter tap `t`: out index o reads in = o*u - pad + t.
inline void valid_range(int t, int pad, int u, int in, int out, int& lo, int& hi) {
  // in >= 0  <=>  o >= (pad - t) / u (rounded up);  in < in_size  <=>  o <= (in - 1 + pad - t) / u
  const int a = pad - t;
  lo = a <= 0 ? 0 : (a + u - 1) / u;
  const int b = in - 1 + pad - t;
  hi = b < 0 ? 0 : std::min(out, b / u + 1);
  if (lo > hi) lo = hi;
}

// col[(c*R + r)*S + s][img*PQ + p*Q + q] = x[img][c][p*u - pad + r][q*u - pad + s] (0 outside).
// Rows are written contiguously. The rows are short (10-28 floats for the lecture net: ~70k copies
// per image over fwd + bwd), so the copy is an inline loop, not a memcpy call; the attribute keeps
// GCC from turning the loop back into one.
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-loop-distribute-patterns")))
#endif
void im2col(const Conv2dShape& sh, const float* x, int nb, float* col) {
  const int P = sh.p(), Q = sh.q(), H = sh.h, W = sh.w;
  const std::size_t PQ = std::size_t(P) * Q, ld = PQ * nb;
  for (int c = 0; c < sh.c; ++c)
    for (int r = 0; r < sh.r; ++r) {
      int p0, p1;
      valid_range(r, sh.pad_h, sh.stride_h, H, P, p0, p1);
      for (int s = 0; s < sh.s; ++s) {
        int q0, q1;
        valid_range(s, sh.pad_w, sh.stride_w, W, Q, q0, q1);
        float* row = col + (std::size_t(c * sh.r + r) * sh.s + s) * ld;
        for (int i = 0; i < nb; ++i) {
          const float* xc = x + (std::size_t(i) * sh.c + c) * H * W;
          float* dst = row + i * PQ;
          if (p0 > 0) std::memset(dst, 0, sizeof(float) * std::size_t(p0) * Q);
          for (int p = p0; p < p1; ++p) {
            float* d = dst + std::size_t(p) * Q;
            const float* src = xc + std::size_t(p * sh.stride_h - sh.pad_h + r) * W - sh.pad_w + s;
            for (int q = 0; q < q0; ++q) d[q] = 0.f;
            if (sh.stride_w == 1) {
              for (int q = q0; q < q1; ++q) d[q] = src[q];
            } else {
              const int u = sh.stride_w;
              for (int q = q0; q < q1; ++q) d[q] = src[q * u];
            }
            for (int q = q1; q < Q; ++q) d[q] = 0.f;
          }
          if (p1 < P) std::memset(dst + std::size_t(p1) * Q, 0, sizeof(float) * std::size_t(P - p1) * Q);
        }
      }
    }
}

// The adjoint of im2col: dx[img][c][ih][iw] += col[...] over every (r, s) tap. dx is zeroed first.
void col2im(const Conv2dShape& sh, const float* col, int nb, float* dx) {
  const int P = sh.p(), Q = sh.q(), H = sh.h, W = sh.w;
  const std::size_t PQ = std::size_t(P) * Q, ld = PQ * nb;
  std::memset(dx, 0, sizeof(float) * std::size_t(nb) * sh.c * H * W);
  for (int i = 0; i < nb; ++i)
    for (int c = 0; c < sh.c; ++c) {
      float* xc = dx + (std::size_t(i) * sh.c + c) * H * W;  // one plane stays in L1/L2 for all taps
      for (int r = 0; r < sh.r; ++r) {
        int p0, p1;
        valid_range(r, sh.pad_h, sh.stride_h, H, P, p0, p1);
        for (int s = 0; s < sh.s; ++s) {
          int q0, q1;
          valid_range(s, sh.pad_w, sh.stride_w, W, Q, q0, q1);
          const float* src = col + (std::size_t(c * sh.r + r) * sh.s + s) * ld + i * PQ;
          for (int p = p0; p < p1; ++p) {
            float* d = xc + std::size_t(p * sh.stride_h - sh.pad_h + r) * W - sh.pad_w + s;
            const float* g = src + std::size_t(p) * Q;
            if (sh.stride_w == 1) {
              for (int q = q0; q < q1; ++q) d[q] += g[q];
            } else {
              const int u = sh.stride_w;
              for (int q = q0; q < q1; ++q) d[q * u] += g[q];
            }
          }
        }
      }
    }
}

// ---- one thread: the images of `sh` (a part of the batch) in chunks ----

void forward_serial(const Conv2dShape& sh, const float* x, const float* w, const float* bias, float* y,
                    std::vector<float>& ws) {
  const int K = sh.k, CRS = sh.c * sh.r * sh.s;
  const std::size_t PQ = std::size_t(sh.p()) * sh.q();
  const bool pw = is_pointwise(sh);
  const int nb = pw ? 1 : chunk_images(sh);
  const std::size_t col_sz = pw ? 0 : std::size_t(CRS) * PQ * nb;
  const std::size_t ybuf_sz = nb > 1 ? std::size_t(K) * PQ * nb : 0;
  ensure(ws, col_sz + ybuf_sz);
  float* col = ws.data();
  float* ybuf = ws.data() + col_sz;
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
    // [K x CRS] * [CRS x m*PQ] -> [K x m*PQ]
    float* out = m > 1 ? ybuf : yi;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, K, int(ncols), CRS, 1.0f, w, CRS, b, int(ncols), 0.0f,
                out, int(ncols));
    if (m > 1 || bias) {
      // Scatter [K][m][PQ] -> [m][K][PQ] (+ bias); in place when m == 1.
      for (int i = 0; i < m; ++i)
        for (int k = 0; k < K; ++k) {
          const float* src = out + std::size_t(k) * ncols + i * PQ;
          float* dst = yi + (std::size_t(i) * K + k) * PQ;
          const float bk = bias ? bias[k] : 0.f;
          if (src == dst) {
            for (std::size_t j = 0; j < PQ; ++j) dst[j] += bk;
          } else {
            for (std::size_t j = 0; j < PQ; ++j) dst[j] = src[j] + bk;
          }
        }
    }
  }
}

// Backward-data as a forward convolution (stride 1 only): dx = conv(dy padded by r-1-pad, W
// rotated by 180 degrees with c and k swapped). Its GEMM is C x (K*R*S) x (H*W) per image instead
// of (C*R*S) x K x (P*Q): far better shaped when K is small (conv2: K = 16 makes the plain path a
// 16-deep GEMM that only writes a 3200-row dcol), at the price of multiplying the zero border
// (H*W / P*Q times the flops, <= 2.5x where we take it).
bool backward_data_as_forward(const Conv2dShape& sh) {
  if (sh.stride_h != 1 || sh.stride_w != 1 || sh.pad_h > sh.r - 1 || sh.pad_w > sh.s - 1) return false;
  const double waste = double(sh.h) * sh.w / (double(sh.p()) * sh.q());
  return sh.k * 4 <= sh.c && waste <= 2.5;
}

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

// wrot: the rotated filters when backward_data_as_forward(sh), else null.
void backward_data_serial(const Conv2dShape& sh, const float* dy, const float* w, float* dx, std::vector<float>& ws,
                          const float* wrot) {
  if (wrot) return forward_serial(rotated_shape(sh), dy, wrot, nullptr, dx, ws);
  const int K = sh.k, CRS = sh.c * sh.r * sh.s;
  const std::size_t PQ = std::size_t(sh.p()) * sh.q();
  const bool pw = is_pointwise(sh);
  const int nb = pw ? 1 : chunk_images(sh);
  const std::size_t col_sz = pw ? 0 : std::size_t(CRS) * PQ * nb;
  const std::size_t dybuf_sz = nb > 1 ? std::size_t(K) * PQ * nb : 0;
  ensure(ws, col_sz + dybuf_sz);
  float* col = ws.data();
  float* dybuf = ws.data() + col_sz;
  for (int i0 = 0; i0 < sh.n; i0 += nb) {
    const int m = std::min(nb, sh.n - i0);
    const float* dyi = dy + std::size_t(i0) * K * PQ;
    float* dxi = dx + std::size_t(i0) * sh.c * sh.h * sh.w;
    const std::size_t ncols = PQ * m;
    const float* a = dyi;
    if (m > 1) {  // gather [m][K][PQ] -> [K][m*PQ]
      for (int i = 0; i < m; ++i)
        for (int k = 0; k < K; ++k)
          std::memcpy(dybuf + std::size_t(k) * ncols + i * PQ, dyi + (std::size_t(i) * K + k) * PQ, sizeof(float) * PQ);
      a = dybuf;
    }
    // [CRS x K] = W^T, times [K x m*PQ] -> dcol [CRS x m*PQ]
    float* out = pw ? dxi : col;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, CRS, int(ncols), K, 1.0f, w, CRS, a, int(ncols), 0.0f, out,
                int(ncols));
    if (!pw) col2im(sh, col, m, dxi);
  }
}

void backward_filter_serial(const Conv2dShape& sh, const float* x, const float* dy, float* dw, float* db,
                            std::vector<float>& ws) {
  const int K = sh.k, CRS = sh.c * sh.r * sh.s;
  const std::size_t PQ = std::size_t(sh.p()) * sh.q();
  const bool pw = is_pointwise(sh);
  const int nb = pw ? 1 : chunk_images(sh, kMaxColFloats);
  const std::size_t col_sz = pw ? 0 : std::size_t(CRS) * PQ * nb;
  const std::size_t dybuf_sz = nb > 1 ? std::size_t(K) * PQ * nb : 0;
  ensure(ws, col_sz + dybuf_sz);
  float* col = ws.data();
  float* dybuf = ws.data() + col_sz;
  if (db) std::fill(db, db + K, 0.f);
  for (int i0 = 0; i0 < sh.n; i0 += nb) {
    const int m = std::min(nb, sh.n - i0);
    const float* xi = x + std::size_t(i0) * sh.c * sh.h * sh.w;
    const float* dyi = dy + std::size_t(i0) * K * PQ;
    const std::size_t ncols = PQ * m;
    const float* a = dyi;
    if (m > 1) {
      for (int i = 0; i < m; ++i)
        for (int k = 0; k < K; ++k)
          std::memcpy(dybuf + std::size_t(k) * ncols + i * PQ, dyi + (std::size_t(i) * K + k) * PQ, sizeof(float) * PQ);
      a = dybuf;
    }
    if (db) {
      for (int i = 0; i < m; ++i)
        for (int k = 0; k < K; ++k) {
          const float* g = dyi + (std::size_t(i) * K + k) * PQ;
          float acc = 0.f;
          for (std::size_t j = 0; j < PQ; ++j) acc += g[j];
          db[k] += acc;
        }
    }
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


// ---- launchers: the batch cut into tasks for the kernel threads (kernels/cpu/threads.h) ----

// Below this many flops a conv runs on the calling thread: a region costs a few microseconds.
constexpr double kMinParallelFlops = 2e6;

// Images per task: the cache-sized chunk of `run` (the convolution that actually runs), but no
// more than an equal share of the batch, so every thread gets work at small batches.
int task_images(const Conv2dShape& sh, const Conv2dShape& run) {
  const int share = (sh.n + kernel_threads() - 1) / kernel_threads();
  return std::max(1, std::min(chunk_images(run), share));
}

bool parallel_conv(const Conv2dShape& sh) {
  return kernel_threads() > 1 && sh.n > 1 && sh.flops() >= kMinParallelFlops;
}

// Images [first, first + s.n) of `sh` as a shape.
Conv2dShape sub_batch(const Conv2dShape& sh, long first, long last) {
  Conv2dShape s = sh;
  s.n = int(last - first);
  return s;
}

// Workspace of the calling thread's tasks (each thread has its own).
std::vector<float>& thread_ws() {
  thread_local std::vector<float> ws;
  return ws;
}

}  // namespace

void conv2d_forward_im2col(const Conv2dShape& sh, const float* x, const float* w, const float* bias, float* y,
                           std::vector<float>& ws) {
  check_shape(sh);
  if (!parallel_conv(sh)) return forward_serial(sh, x, w, bias, y, ws);
  const std::size_t xi = std::size_t(sh.c) * sh.h * sh.w, yi = std::size_t(sh.k) * sh.p() * sh.q();
  const int per = task_images(sh, sh), tasks = (sh.n + per - 1) / per;
  parallel_tasks(tasks, [&](int t) {
    const long i0 = long(t) * per, i1 = std::min<long>(sh.n, i0 + per);
    forward_serial(sub_batch(sh, i0, i1), x + i0 * xi, w, bias, y + i0 * yi, thread_ws());
  });
}

void conv2d_backward_data_im2col(const Conv2dShape& sh, const float* dy, const float* w, float* dx,
                                 std::vector<float>& ws) {
  check_shape(sh);
  const bool rot = backward_data_as_forward(sh);
  thread_local std::vector<float> wt;  // the calling thread's rotated filters, shared by its tasks
  if (rot) {
    ensure(wt, sh.w_size());
    rotate_filters(sh, w, wt.data());
  }
  const float* wrot = rot ? wt.data() : nullptr;
  if (!parallel_conv(sh)) return backward_data_serial(sh, dy, w, dx, ws, wrot);
  const std::size_t xi = std::size_t(sh.c) * sh.h * sh.w, yi = std::size_t(sh.k) * sh.p() * sh.q();
  const int per = task_images(sh, rot ? rotated_shape(sh) : sh), tasks = (sh.n + per - 1) / per;
  parallel_tasks(tasks, [&](int t) {
    const long i0 = long(t) * per, i1 = std::min<long>(sh.n, i0 + per);
    backward_data_serial(sub_batch(sh, i0, i1), dy + i0 * yi, w, dx + i0 * xi, thread_ws(), wrot);
  });
}

void conv2d_backward_filter_im2col(const Conv2dShape& sh, const float* x, const float* dy, float* dw, float* db,
                                   std::vector<float>& ws) {
  check_shape(sh);
  if (!parallel_conv(sh)) return backward_filter_serial(sh, x, dy, dw, db, ws);
  // Each task reduces over its own images into its own partial dW (task 0: dw itself); the partials
  // are added in task order afterwards, so the bits do not depend on which thread ran what. A few
  // tasks per thread: enough to balance on a shared machine, few partial sums to add.
  const int tasks = std::min(sh.n, std::max(kernel_threads(), std::min(4 * kernel_threads(), sh.n / chunk_images(sh))));
  const std::size_t xi = std::size_t(sh.c) * sh.h * sh.w, yi = std::size_t(sh.k) * sh.p() * sh.q();
  const std::size_t wsz = sh.w_size(), bsz = db ? std::size_t(sh.k) : 0;
  thread_local std::vector<float> partial;  // [tasks - 1][wsz + bsz], the calling thread's
  ensure(partial, (tasks - 1) * (wsz + bsz));
  float* const base = partial.data();  // tasks run on other threads too: no thread_local inside
  parallel_tasks(tasks, [&](int t) {
    long i0, i1;
    split_range(sh.n, tasks, t, i0, i1);
    float* pdw = t == 0 ? dw : base + (t - 1) * (wsz + bsz);
    float* pdb = !db ? nullptr : t == 0 ? db : pdw + wsz;
    backward_filter_serial(sub_batch(sh, i0, i1), x + i0 * xi, dy + i0 * yi, pdw, pdb, thread_ws());
  });
  for (int t = 1; t < tasks; ++t) {
    const float* p = base + (t - 1) * (wsz + bsz);
    for (std::size_t i = 0; i < wsz; ++i) dw[i] += p[i];
    for (std::size_t i = 0; i < bsz; ++i) db[i] += p[wsz + i];
  }
}

}  // namespace cpu
}  // namespace dlb
