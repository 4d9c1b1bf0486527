// Recurrent layers on the GPU (see rnn.h): cuBLAS for the GEMMs (cuda::gemm_f32 in the caller's
// autocast dtype), a thread per (batch row, hidden unit) for the fused cells.
#include "kernels/cuda/seq/rnn.h"

#include "kernels/cuda/cublas_gemm.h"
#include "kernels/cuda/seq/common.cuh"

namespace dlb::cuda::seq {
namespace {
using cpu::seq::RnnCell;
using cpu::seq::RnnShape;

// Row-major C = op(A) op(B) + beta C on the stream, autocast per dt (cublas_gemm.h's table).
struct Gemm {
  cudaStream_t st;
  DType dt;
  void operator()(bool ta, bool tb, long m, long n, long k, const float* a, long lda, const float* b, long ldb,
                  float beta, float* c, long ldc) const {
    gemm_f32(st, dt, ta, tb, m, n, k, 1.f, a, lda, b, ldb, beta, c, ldc);
  }
};

__device__ __forceinline__ float sigm(float a) { return 1.f / (1.f + expf(-a)); }

// Step t: gates of row (t, b) at g + ((b * rs) * GH); bias = b_ih + b_hh.
__global__ void cell_fwd_k(RnnCell cell, float* g, long rs, const float* bias, const float* cp, float* c, float* h,
                           float* y, long y_rs, int B, int H) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= B * H) return;
  const int b = e / H, j = e % H, GH = (cell == RnnCell::lstm ? 4 : 1) * H;
  float* a = g + b * rs * GH;
  float hv;
  if (cell == RnnCell::lstm) {
    const float i = sigm(a[j] + bias[j]), f = sigm(a[H + j] + bias[H + j]);
    const float gg = tanhf(a[2 * H + j] + bias[2 * H + j]), o = sigm(a[3 * H + j] + bias[3 * H + j]);
    const float cn = f * cp[e] + i * gg;
    a[j] = i, a[H + j] = f, a[2 * H + j] = gg, a[3 * H + j] = o;
    c[e] = cn;
    hv = o * tanhf(cn);
  } else {
    hv = tanhf(a[j] + bias[j]);
    a[j] = hv;
  }
  h[e] = hv;
  y[b * y_rs * H + j] = hv;
}

__global__ void cell_bwd_k(RnnCell cell, const float* g, long rs, const float* cp, const float* c, const float* hh,
                           const float* dy, long y_rs, const float* dh, float* dc, float* da, int B, int H) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= B * H) return;
  const int b = e / H, j = e % H, GH = (cell == RnnCell::lstm ? 4 : 1) * H;
  const float d = dh[e] + (dy ? dy[b * y_rs * H + j] : 0.f);
  const float* a = g + b * rs * GH;
  float* out = da + b * rs * GH;
  if (cell != RnnCell::lstm) {
    out[j] = d * (1.f - hh[e] * hh[e]);
    return;
  }
  const float i = a[j], f = a[H + j], gg = a[2 * H + j], o = a[3 * H + j], tc = tanhf(c[e]);
  const float dct = dc[e] + d * o * (1.f - tc * tc);
  out[j] = dct * gg * i * (1.f - i);
  out[H + j] = dct * cp[e] * f * (1.f - f);
  out[2 * H + j] = dct * i * (1.f - gg * gg);
  out[3 * H + j] = d * tc * o * (1.f - o);
  dc[e] = dct * f;
}

__global__ void bias_sum_k(const float* bih, const float* bhh, float* out, int n) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) out[k] = (bih ? bih[k] : 0.f) + (bhh ? bhh[k] : 0.f);
}
// db[k] = sum over the rows of da (a thread per column, rows in order); both outputs when given.
__global__ void column_sum_k(const float* da, long rows, int GH, float* db1, float* db2) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= GH) return;
  float s = 0.f;
  for (long r = 0; r < rows; ++r) s += da[r * GH + k];
  if (db1) db1[k] = s;
  if (db2) db2[k] = s;
}

// hb[(b T + t) H + j] = hs[t][b][j], t < T: the states each step read, in batch-first row order.
__global__ void states_batch_first_k(const float* hs, int B, int T, int H, float* hb) {
  const long n = long(B) * T * H;
  for (long e = blockIdx.x * long(blockDim.x) + threadIdx.x; e < n; e += long(blockDim.x) * gridDim.x) {
    const long r = e / H, b = r / T, t = r % T;
    hb[e] = hs[(t * B + b) * H + e % H];
  }
}

void copy_or_zero(float* dst, const float* src, std::size_t n, cudaStream_t st) {
  if (src) DLB_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, st));
  else DLB_CUDA_CHECK(cudaMemsetAsync(dst, 0, n * sizeof(float), st));
}

}  // namespace

std::size_t rnn_saved_floats(const RnnShape& s) { return cpu::seq::rnn_saved_floats(s); }
// forward's summed bias [GH]; backward's da [N GH], dh and dc [B H], batch-first states [N H].
std::size_t rnn_scratch_floats(const RnnShape& s) {
  return std::size_t(s.rows()) * s.gates() * s.H + 2 * std::size_t(s.B) * s.H + std::size_t(s.gates()) * s.H +
         (s.batch_first ? std::size_t(s.rows()) * s.H : 0);
}

void rnn_forward(const RnnShape& s, const cpu::seq::RnnWeights& w, const float* x, const float* h0, const float* c0,
                 float* y, float* hn, float* cn, float* saved, float* scratch, cudaStream_t st, DType dt) {
  s.check();
  const int B = s.B, H = s.H, GH = s.gates() * H;
  const long N = s.rows(), BH = long(B) * H, rs = s.batch_first ? s.T : 1;
  const bool lstm = s.cell == RnnCell::lstm;
  float* const gates = saved;
  float* const hs = gates + N * GH;
  float* const cs = lstm ? hs + (s.T + 1) * BH : nullptr;
  float* const bias = scratch;  // (the rest of scratch is backward's)
  bias_sum_k<<<grid_for(GH), kThreads, 0, st>>>(w.b_ih, w.b_hh, bias, GH);
  copy_or_zero(hs, h0, BH, st);
  if (lstm) copy_or_zero(cs, c0, BH, st);
  const Gemm gemm{st, dt};
  gemm(false, true, N, GH, s.I, x, s.I, w.w_ih, s.I, 0.f, gates, GH);
  for (int t = 0; t < s.T; ++t) {
    float* const gt = gates + s.row(t, 0) * GH;
    gemm(false, true, B, GH, H, hs + t * BH, H, w.w_hh, H, 1.f, gt, rs * GH);
    cell_fwd_k<<<grid_for(BH), kThreads, 0, st>>>(s.cell, gt, rs, bias, lstm ? cs + t * BH : nullptr,
                                                   lstm ? cs + (t + 1) * BH : nullptr, hs + (t + 1) * BH,
                                                   y + s.row(t, 0) * H, rs, B, H);
  }
  check_launch();
  if (hn) DLB_CUDA_CHECK(cudaMemcpyAsync(hn, hs + s.T * BH, BH * sizeof(float), cudaMemcpyDeviceToDevice, st));
  if (cn && lstm) DLB_CUDA_CHECK(cudaMemcpyAsync(cn, cs + s.T * BH, BH * sizeof(float), cudaMemcpyDeviceToDevice, st));
}

void rnn_backward(const RnnShape& s, const cpu::seq::RnnWeights& w, const float* x, const float* dy, const float* dhn,
                  const float* dcn, const float* saved, float* dx, float* dh0, float* dc0, const cpu::seq::RnnGrads& g,
                  float* scratch, cudaStream_t st, DType dt) {
  s.check();
  const int B = s.B, H = s.H, GH = s.gates() * H;
  const long N = s.rows(), BH = long(B) * H, rs = s.batch_first ? s.T : 1;
  const bool lstm = s.cell == RnnCell::lstm;
  const float* const gates = saved;
  const float* const hs = gates + N * GH;
  const float* const cs = lstm ? hs + (s.T + 1) * BH : nullptr;
  float* const da = scratch + GH;  // after forward's bias
  float* const dh = da + N * GH;
  float* const dc = dh + BH;
  copy_or_zero(dh, dhn, BH, st);
  copy_or_zero(dc, lstm ? dcn : nullptr, BH, st);
  const Gemm gemm{st, dt};
  for (int t = s.T - 1; t >= 0; --t) {
    cell_bwd_k<<<grid_for(BH), kThreads, 0, st>>>(s.cell, gates + s.row(t, 0) * GH, rs, lstm ? cs + t * BH : nullptr,
                                                   lstm ? cs + (t + 1) * BH : nullptr, hs + (t + 1) * BH,
                                                   dy ? dy + s.row(t, 0) * H : nullptr, rs, dh, dc,
                                                   da + s.row(t, 0) * GH, B, H);
    gemm(false, false, B, H, GH, da + s.row(t, 0) * GH, rs * GH, w.w_hh, H, 0.f, dh, H);
  }
  check_launch();
  if (dh0) DLB_CUDA_CHECK(cudaMemcpyAsync(dh0, dh, BH * sizeof(float), cudaMemcpyDeviceToDevice, st));
  if (dc0 && lstm) DLB_CUDA_CHECK(cudaMemcpyAsync(dc0, dc, BH * sizeof(float), cudaMemcpyDeviceToDevice, st));
  if (dx) gemm(false, false, N, s.I, GH, da, GH, w.w_ih, s.I, 0.f, dx, s.I);
  if (g.dw_ih) gemm(true, false, GH, s.I, N, da, GH, x, s.I, 0.f, g.dw_ih, s.I);
  if (g.dw_hh) {  // dW_hh = da^T (the state each row's step read); batch-first rows pair with hs gathered
    const float* h_in = hs;  // seq-first: row (t, b) of da pairs with hs[t][b], already in that order
    if (s.batch_first) {     // one gather and one GEMM, not B GEMMs (64 launches a layer at batch 64)
      float* const hb = dc + BH;
      states_batch_first_k<<<grid_for(std::size_t(N) * H), kThreads, 0, st>>>(hs, B, s.T, H, hb);
      h_in = hb;
    }
    gemm(true, false, GH, H, N, da, GH, h_in, H, 0.f, g.dw_hh, H);
  }
  if (g.db_ih || g.db_hh) column_sum_k<<<grid_for(GH), kThreads, 0, st>>>(da, N, GH, g.db_ih, g.db_hh);
  check_launch();
}

}  // namespace dlb::cuda::seq
