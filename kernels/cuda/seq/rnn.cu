// Recurrent layers on the GPU (see rnn.h): cuBLAS for the GEMMs (cuda::gemm_f32 in the caller's
// autocast dtype), a thread per (batch row, hidden unit) for the fused cells; or, per step, one
// fused kernel for the recurrent product and the cells (rnn_step_path).
#include "kernels/cuda/seq/rnn.h"

#include "kernels/common/rnn_step_env.h"
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

// One unit j of one batch row's cell, both paths' (the per-step cuBLAS one and the fused one).
// Forward: a -> the row's G H gates holding all but add[q] of gate q's pre-activation; stores the
// activated gates back into a (backward's saved values), c_t into *cn (LSTM), returns h_t.
__device__ __forceinline__ float cell_fwd_unit(RnnCell cell, float* a, const float (&add)[4], int j, int H, float cp,
                                               float* cn) {
  if (cell == RnnCell::lstm) {
    const float i = sigm(a[j] + add[0]), f = sigm(a[H + j] + add[1]);
    const float gg = tanhf(a[2 * H + j] + add[2]), o = sigm(a[3 * H + j] + add[3]);
    const float c = f * cp + i * gg;
    a[j] = i, a[H + j] = f, a[2 * H + j] = gg, a[3 * H + j] = o;
    *cn = c;
    return o * tanhf(c);
  }
  const float hv = tanhf(a[j] + add[0]);
  a[j] = hv;
  return hv;
}
// Backward: d = dL/dh_t, a the row's saved gates, out its dL/da row; *dc: dL/dc_t in, dL/dc_{t-1}
// out (LSTM); cp, c: c_{t-1}, c_t; h: h_t (tanh).
__device__ __forceinline__ void cell_bwd_unit(RnnCell cell, const float* a, float* out, int j, int H, float d, float cp,
                                              float c, float h, float* dc) {
  if (cell != RnnCell::lstm) {
    out[j] = d * (1.f - h * h);
    return;
  }
  const float i = a[j], f = a[H + j], gg = a[2 * H + j], o = a[3 * H + j], tc = tanhf(c);
  const float dct = *dc + d * o * (1.f - tc * tc);
  out[j] = dct * gg * i * (1.f - i);
  out[H + j] = dct * cp * f * (1.f - f);
  out[2 * H + j] = dct * i * (1.f - gg * gg);
  out[3 * H + j] = d * tc * o * (1.f - o);
  *dc = dct * f;
}

// ---- per step: cuBLAS's recurrent GEMM (into the gates), then a thread per (batch row, unit) ----

// Step t: gates of row (t, b) at g + ((b * rs) * GH); bias = b_ih + b_hh.
__global__ void cell_fwd_k(RnnCell cell, float* g, long rs, const float* bias, const float* cp, float* c, float* h,
                           float* y, long y_rs, int B, int H) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= B * H) return;
  const int b = e / H, j = e % H, G = cell == RnnCell::lstm ? 4 : 1;
  float add[4] = {};
#pragma unroll
  for (int q = 0; q < 4; ++q)
    if (q < G) add[q] = bias[q * H + j];
  float cn = 0.f;
  const float hv = cell_fwd_unit(cell, g + b * rs * G * H, add, j, H, cp ? cp[e] : 0.f, &cn);
  if (c) c[e] = cn;
  h[e] = hv;
  y[b * y_rs * H + j] = hv;
}

__global__ void cell_bwd_k(RnnCell cell, const float* g, long rs, const float* cp, const float* c, const float* hh,
                           const float* dy, long y_rs, const float* dh, float* dc, float* da, int B, int H) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= B * H) return;
  const int b = e / H, j = e % H, GH = (cell == RnnCell::lstm ? 4 : 1) * H;
  const float d = dh[e] + (dy ? dy[b * y_rs * H + j] : 0.f);
  float dcv = dc[e];
  cell_bwd_unit(cell, g + b * rs * GH, da + b * rs * GH, j, H, d, cp ? cp[e] : 0.f, c ? c[e] : 0.f, hh[e], &dcv);
  if (cell == RnnCell::lstm) dc[e] = dcv;
}

// ---- fused: one kernel a step (rnn.h) ----
// A block is kStepWarps warps. Forward: kStepRows gate rows a block, U = kStepRows / G units (all G
// gates of each); backward: a warp per unit. The block's dot products land in shared memory, then
// its threads apply the cells of its units: nothing crosses blocks within a step.
constexpr int kStepWarps = 4, kStepRows = 16, kMaxB = kFusedMaxBatch;

// acc[b] = sum_k w[k] v[b ldv + k], b < B, summed over the warp (every lane holds the sums). The
// lanes stride k: W's row and each state row are read coalesced; acc stays in registers (kMaxB
// unrolled, guarded by the warp-uniform B).
__device__ __forceinline__ void warp_dot_rows(const float* __restrict__ w, int K, const float* __restrict__ v, long ldv,
                                              int B, float (&acc)[kMaxB]) {
#pragma unroll
  for (int b = 0; b < kMaxB; ++b) acc[b] = 0.f;
  for (int k = threadIdx.x % 32; k < K; k += 32) {
    const float wk = w[k];
#pragma unroll
    for (int b = 0; b < kMaxB; ++b)
      if (b < B) acc[b] = fmaf(wk, v[b * ldv + k], acc[b]);
  }
#pragma unroll
  for (int b = 0; b < kMaxB; ++b)
    if (b < B) acc[b] = warp_sum(acc[b]);
}

// Step t: g the step's gate rows (row b at g + b rs GH, W_ih x + nothing else in them), hp / cp
// h_{t-1} / c_{t-1} [B, H]; writes what cell_fwd_k writes. Grid: ceil(H / U) blocks.
__global__ void __launch_bounds__(kStepWarps * 32)
    step_fwd_k(RnnCell cell, float* g, long rs, const float* __restrict__ whh, const float* __restrict__ bias,
               const float* __restrict__ hp, const float* cp, float* c, float* h, float* y, int B, int H) {
  __shared__ float pre[kStepRows][kMaxB];
  const int G = cell == RnnCell::lstm ? 4 : 1, U = kStepRows / G, j0 = blockIdx.x * U, GH = G * H;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int r = warp; r < kStepRows; r += kStepWarps) {  // r: gate r / U of unit j0 + r % U
    const int q = r / U, j = j0 + r % U;
    if (q >= G || j >= H) continue;  // warp-uniform
    float acc[kMaxB];
    warp_dot_rows(whh + long(q * H + j) * H, H, hp, H, B, acc);
    if (lane == 0) {
#pragma unroll
      for (int b = 0; b < kMaxB; ++b)
        if (b < B) pre[r][b] = acc[b];
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < U * B; e += blockDim.x) {
    const int b = e / U, u = e % U, j = j0 + u;
    if (j >= H) continue;
    float add[4] = {};
#pragma unroll
    for (int q = 0; q < 4; ++q)
      if (q < G) add[q] = pre[q * U + u][b] + bias[q * H + j];
    const long i = long(b) * H + j;
    float cn = 0.f;
    const float hv = cell_fwd_unit(cell, g + b * rs * GH, add, j, H, cp ? cp[i] : 0.f, &cn);
    if (c) c[i] = cn;
    h[i] = hv;
    y[b * rs * H + j] = hv;
  }
}

// Step t backward: dL/dh_t at units j0 .. j0 + kStepWarps from step t + 1's dA (dan: row b at
// dan + b rs GH, through W_hh^T's rows wt [H, GH]; null at t = T - 1, where dh [B, H] holds dL/dh_T),
// plus dy, then the cells' backward at those units into da (row b at da + b rs GH) and dc (in place).
// cell_on false: only dL/dh at the units, written to dh (after step 0: dh0). Grid: ceil(H / 4).
__global__ void __launch_bounds__(kStepWarps * 32)
    step_bwd_k(RnnCell cell, bool cell_on, const float* __restrict__ wt, const float* __restrict__ dan, long rs,
               float* dh, const float* g, const float* cp, const float* c, const float* hh, const float* dy, float* dc,
               float* da, int B, int H) {
  __shared__ float dhs[kStepWarps][kMaxB];
  const int GH = (cell == RnnCell::lstm ? 4 : 1) * H, j0 = blockIdx.x * kStepWarps;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, jw = j0 + warp;
  if (jw < H) {
    if (dan) {
      float acc[kMaxB];
      warp_dot_rows(wt + long(jw) * GH, GH, dan, rs * GH, B, acc);
      if (lane == 0) {
#pragma unroll
        for (int b = 0; b < kMaxB; ++b)
          if (b < B) dhs[warp][b] = acc[b];
      }
    } else if (lane < B) {
      dhs[warp][lane] = dh[long(lane) * H + jw];
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < kStepWarps * B; e += blockDim.x) {
    const int b = e / kStepWarps, u = e % kStepWarps, j = j0 + u;
    if (j >= H) continue;
    const long i = long(b) * H + j;
    if (!cell_on) {
      dh[i] = dhs[u][b];
      continue;
    }
    const float d = dhs[u][b] + (dy ? dy[b * rs * H + j] : 0.f);
    float dcv = dc ? dc[i] : 0.f;
    cell_bwd_unit(cell, g + b * rs * GH, da + b * rs * GH, j, H, d, cp ? cp[i] : 0.f, c ? c[i] : 0.f, hh[i], &dcv);
    if (dc) dc[i] = dcv;
  }
}

// at[c rows + r] = a[r cols + c]: W_hh^T for the fused backward, once a call.
__global__ void transpose_k(const float* a, int rows, int cols, float* at) {
  const long n = long(rows) * cols;
  for (long e = blockIdx.x * long(blockDim.x) + threadIdx.x; e < n; e += long(blockDim.x) * gridDim.x)
    at[(e % cols) * rows + e / cols] = a[e];
}

// ---- both paths ----

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

RnnStep rnn_step_path(const RnnShape& s, DType gemm, RnnStep asked) {
  if (asked == RnnStep::automatic) {
    static const RnnStep env = rnn_step_fused_from_env() ? RnnStep::fused : RnnStep::cublas;
    asked = env;
  }
  return asked == RnnStep::fused && gemm == DType::fp32 && s.B <= kFusedMaxBatch ? RnnStep::fused : RnnStep::cublas;
}

std::size_t rnn_saved_floats(const RnnShape& s) { return cpu::seq::rnn_saved_floats(s); }
// forward's summed bias [GH]; backward's da [N GH], dh and dc [B H], batch-first states [N H], and
// the fused path's W_hh^T [H, GH].
std::size_t rnn_scratch_floats(const RnnShape& s) {
  const std::size_t GH = std::size_t(s.gates()) * s.H;
  return std::size_t(s.rows()) * GH + 2 * std::size_t(s.B) * s.H + GH +
         (s.batch_first ? std::size_t(s.rows()) * s.H : 0) + GH * s.H;
}

void rnn_forward(const RnnShape& s, const cpu::seq::RnnWeights& w, const float* x, const float* h0, const float* c0,
                 float* y, float* hn, float* cn, float* saved, float* scratch, cudaStream_t st, DType dt,
                 RnnStep step) {
  s.check();
  const int B = s.B, H = s.H, GH = s.gates() * H;
  const long N = s.rows(), BH = long(B) * H, rs = s.batch_first ? s.T : 1;
  const bool lstm = s.cell == RnnCell::lstm, fused = rnn_step_path(s, dt, step) == RnnStep::fused;
  float* const gates = saved;
  float* const hs = gates + N * GH;
  float* const cs = lstm ? hs + (s.T + 1) * BH : nullptr;
  float* const bias = scratch;  // (the rest of scratch is backward's)
  bias_sum_k<<<grid_for(GH), kThreads, 0, st>>>(w.b_ih, w.b_hh, bias, GH);
  copy_or_zero(hs, h0, BH, st);
  if (lstm) copy_or_zero(cs, c0, BH, st);
  const Gemm gemm{st, dt};
  gemm(false, true, N, GH, s.I, x, s.I, w.w_ih, s.I, 0.f, gates, GH);
  const int fused_grid = (H + kStepRows / s.gates() - 1) / (kStepRows / s.gates());
  for (int t = 0; t < s.T; ++t) {
    float* const gt = gates + s.row(t, 0) * GH;
    float* const cp = lstm ? cs + t * BH : nullptr;
    float* const c = lstm ? cs + (t + 1) * BH : nullptr;
    float* const yt = y + s.row(t, 0) * H;
    if (fused) {
      step_fwd_k<<<fused_grid, kStepWarps * 32, 0, st>>>(s.cell, gt, rs, w.w_hh, bias, hs + t * BH, cp, c,
                                                          hs + (t + 1) * BH, yt, B, H);
    } else {
      gemm(false, true, B, GH, H, hs + t * BH, H, w.w_hh, H, 1.f, gt, rs * GH);
      cell_fwd_k<<<grid_for(BH), kThreads, 0, st>>>(s.cell, gt, rs, bias, cp, c, hs + (t + 1) * BH, yt, rs, B, H);
    }
  }
  check_launch();
  if (hn) DLB_CUDA_CHECK(cudaMemcpyAsync(hn, hs + s.T * BH, BH * sizeof(float), cudaMemcpyDeviceToDevice, st));
  if (cn && lstm) DLB_CUDA_CHECK(cudaMemcpyAsync(cn, cs + s.T * BH, BH * sizeof(float), cudaMemcpyDeviceToDevice, st));
}

void rnn_backward(const RnnShape& s, const cpu::seq::RnnWeights& w, const float* x, const float* dy, const float* dhn,
                  const float* dcn, const float* saved, float* dx, float* dh0, float* dc0, const cpu::seq::RnnGrads& g,
                  float* scratch, cudaStream_t st, DType dt, RnnStep step) {
  s.check();
  const int B = s.B, H = s.H, GH = s.gates() * H;
  const long N = s.rows(), BH = long(B) * H, rs = s.batch_first ? s.T : 1;
  const bool lstm = s.cell == RnnCell::lstm, fused = rnn_step_path(s, dt, step) == RnnStep::fused;
  const float* const gates = saved;
  const float* const hs = gates + N * GH;
  const float* const cs = lstm ? hs + (s.T + 1) * BH : nullptr;
  float* const da = scratch + GH;  // after forward's bias
  float* const dh = da + N * GH;
  float* const dc = dh + BH;
  float* const hb = dc + BH;  // batch-first states for dW_hh
  float* const wt = hb + (s.batch_first ? N * H : 0);
  copy_or_zero(dh, dhn, BH, st);
  copy_or_zero(dc, lstm ? dcn : nullptr, BH, st);
  const Gemm gemm{st, dt};
  const int fused_grid = (H + kStepWarps - 1) / kStepWarps;
  if (fused) transpose_k<<<grid_for(std::size_t(GH) * H), kThreads, 0, st>>>(w.w_hh, GH, H, wt);
  for (int t = s.T - 1; t >= 0; --t) {
    const float* const gt = gates + s.row(t, 0) * GH;
    const float* const cp = lstm ? cs + t * BH : nullptr;
    const float* const c = lstm ? cs + (t + 1) * BH : nullptr;
    const float* const dyt = dy ? dy + s.row(t, 0) * H : nullptr;
    float* const dat = da + s.row(t, 0) * GH;
    if (fused) {
      const float* const dan = t + 1 < s.T ? da + s.row(t + 1, 0) * GH : nullptr;
      step_bwd_k<<<fused_grid, kStepWarps * 32, 0, st>>>(s.cell, true, wt, dan, rs, dh, gt, cp, c, hs + (t + 1) * BH,
                                                          dyt, dc, dat, B, H);
    } else {
      cell_bwd_k<<<grid_for(BH), kThreads, 0, st>>>(s.cell, gt, rs, cp, c, hs + (t + 1) * BH, dyt, rs, dh, dc, dat, B,
                                                     H);
      gemm(false, false, B, H, GH, dat, rs * GH, w.w_hh, H, 0.f, dh, H);
    }
  }
  // fused: dh still holds dL/dh_T's copy; dL/dh_0 = dA_0 W_hh only if asked for
  if (fused && dh0)
    step_bwd_k<<<fused_grid, kStepWarps * 32, 0, st>>>(s.cell, false, wt, da + s.row(0, 0) * GH, rs, dh, nullptr,
                                                        nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, B, H);
  check_launch();
  if (dh0) DLB_CUDA_CHECK(cudaMemcpyAsync(dh0, dh, BH * sizeof(float), cudaMemcpyDeviceToDevice, st));
  if (dc0 && lstm) DLB_CUDA_CHECK(cudaMemcpyAsync(dc0, dc, BH * sizeof(float), cudaMemcpyDeviceToDevice, st));
  if (dx) gemm(false, false, N, s.I, GH, da, GH, w.w_ih, s.I, 0.f, dx, s.I);
  if (g.dw_ih) gemm(true, false, GH, s.I, N, da, GH, x, s.I, 0.f, g.dw_ih, s.I);
  if (g.dw_hh) {  // dW_hh = da^T (the state each row's step read); batch-first rows pair with hs gathered
    const float* h_in = hs;  // seq-first: row (t, b) of da pairs with hs[t][b], already in that order
    if (s.batch_first) {     // one gather and one GEMM, not B GEMMs (64 launches a layer at batch 64)
      states_batch_first_k<<<grid_for(std::size_t(N) * H), kThreads, 0, st>>>(hs, B, s.T, H, hb);
      h_in = hb;
    }
    gemm(true, false, GH, H, N, da, GH, h_in, H, 0.f, g.dw_hh, H);
  }
  if (g.db_ih || g.db_hh) column_sum_k<<<grid_for(GH), kThreads, 0, st>>>(da, N, GH, g.db_ih, g.db_hh);
  check_launch();
}

}  // namespace dlb::cuda::seq
