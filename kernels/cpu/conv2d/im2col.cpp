// im2col / col2im and the chunking of the im2col + OpenBLAS sgemm path (conv2d.h).
#include "kernels/cpu/conv2d/internal.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace dlb::cpu {
using namespace detail;

namespace detail {
// Images per GEMM. Forward and backward-data: the im2col chunk should stay cache-sized (about
// 1 MB: written by im2col / the GEMM and consumed while still in L2/L3; see
// docs/notes/2026-11-25-conv-cpu.md), but the GEMM needs enough columns (>= 512) to run near peak
// (conv2 has only 100 output pixels per image). Backward-filter reduces over the batch inside the
// GEMM (its K dimension), so one big GEMM beats many small ones that each synchronise OpenBLAS's
// threads and re-write dW. kMaxColFloats bounds the workspace in every case.
// (kTargetColFloats = 1 MiB: internal.h)
constexpr std::size_t kMinGemmCols = 512;
constexpr std::size_t kMaxColFloats = std::size_t(16) << 20;  // 64 MiB hard cap (>= 1 image always)


int chunk_images(const Conv2dShape& sh, std::size_t target) {
  const std::size_t pq = std::size_t(sh.p()) * sh.q();
  const std::size_t per_image = std::size_t(sh.c) * sh.r * sh.s * pq;
  std::size_t nb;
  if (pq >= kMinGemmCols) {
    nb = 1;  // one image is a wide enough GEMM, and its output needs no relayout
  } else {
    nb = std::max<std::size_t>(1, target / per_image);
    nb = std::max(nb, (kMinGemmCols + pq - 1) / pq);
  }
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

// ws holding n floats from a 64-byte boundary, and that boundary. The kernels' vector loads of
// workspace rows (filters, im2col rows, row buffers) then never straddle two cache lines, whatever
// address malloc returned (large blocks come back 16 bytes past a page boundary).
float* ensure_aligned(std::vector<float>& ws, std::size_t n) {
  ensure(ws, n + 16);
  const auto p = reinterpret_cast<std::uintptr_t>(ws.data());
  return ws.data() + ((64 - p % 64) % 64) / sizeof(float);
}

// Sum of n floats in 8 interleaved partial sums: the compiler keeps them in one vector register
// (a single running sum is a chain of dependent adds, ~4 cycles per element).
float sum(const float* g, std::size_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::size_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; ++l) acc[l] += g[j + l];
  for (; j < n; ++j) acc[j % 8] += g[j];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
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

Im2colPlan im2col_plan(const Conv2dShape& sh, std::vector<float>& ws) {
  const int K = sh.k, CRS = sh.c * sh.r * sh.s;
  const std::size_t PQ = std::size_t(sh.p()) * sh.q();
  const bool pw = is_pointwise(sh);
  const int nb = pw ? 1 : chunk_images(sh);
  const std::size_t col_sz = pw ? 0 : std::size_t(CRS) * PQ * nb;
  const std::size_t buf_sz = nb > 1 ? std::size_t(K) * PQ * nb : 0;
  float* col = ensure_aligned(ws, col_sz + buf_sz);
  return {K, CRS, PQ, pw, nb, col, col + col_sz};
}

// m images of [K][PQ] -> [K][m*PQ] (the GEMM's layout for a chunk).
void gather_images(const float* src, int m, int K, std::size_t PQ, float* dst) {
  const std::size_t ncols = PQ * m;
  for (int i = 0; i < m; ++i)
    for (int k = 0; k < K; ++k)
      std::memcpy(dst + std::size_t(k) * ncols + i * PQ, src + (std::size_t(i) * K + k) * PQ, sizeof(float) * PQ);
}

// forward_im2col_gemm: y of the images of `sh`, im2col + sgemm in chunks of nb images (w KCRS).
void forward_im2col_gemm(const Conv2dShape& sh, const float* x, const float* w, const float* bias, float* y,
                         std::vector<float>& ws) {
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

// backward_data_im2col_gemm: dx (overwritten) of the images of `sh`: W^T dy per chunk, then col2im.
void backward_data_im2col_gemm(const Conv2dShape& sh, const float* dy, const float* w, float* dx,
                               std::vector<float>& ws) {
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

// backward_filter_im2col_gemm: dw and db (overwritten) over the images of `sh`: dY col^T per chunk.
void backward_filter_im2col_gemm(const Conv2dShape& sh, const float* x, const float* dy, float* dw, float* db,
                                 std::vector<float>& ws) {
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
