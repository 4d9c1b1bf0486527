// Attention on the GPU (see attention.h): unfused over cuBLAS, and the fused kernels. In the fused
// ones a warp owns one row; for the dot products each lane takes one row of the other side's
// 32-row tile (kept in shared memory with rows padded to D + 1 floats: lanes reading down a column
// hit 32 different banks), for the accumulations each lane holds d = lane + 32 c (c < 4).
#include "kernels/cuda/seq/attention.h"

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/common/errors.h"
#include "kernels/cuda/handles.h"
#include "kernels/cuda/seq/common.cuh"
#include "kernels/cuda/seq/elementwise.h"
#include "kernels/cuda/seq/rows.h"

namespace dlb::cuda::seq {
namespace {

// ---- unfused ----
// One operand of the B x H per-head products: element (b, h) starts at p + b sb + h sh, rows ld apart.
struct Heads {
  const float* p;
  long ld, sb, sh;
};
Heads heads(CView v) { return {v.p, v.st, v.sb, v.sh}; }
Heads heads(MView v) { return {v.p, v.st, v.sb, v.sh}; }
Heads probs_of(const float* p, const Attn& a) { return {p, a.Tk, long(a.H) * a.Tq * a.Tk, long(a.Tq) * a.Tk}; }
Heads rows_from(Heads o, long r0) { return o.p += r0 * o.ld, o; }  // the operand from its row r0

// Row-major C = alpha op(A) op(B) for each (b, h), as min(B, H) strided batches of max(B, H)
// products (a head's products over b share one stride, as a row's over h do): B = 64, H = 4 is 4
// cuBLAS launches, not 64. At ~3-5 us a launch, 64 per product was most of the transformer's GPU
// step at batch 64 (6 attentions x 6 products a step: 2304 launches, ~10 ms of a 30 ms step).
void gemm_bh(cublasHandle_t h, const Attn& a, bool ta, bool tb, int m, int n, int k, float alpha, Heads x, Heads y,
             Heads c, float beta = 0.f) {
  const bool batch_heads = a.H >= a.B;
  const int outer = batch_heads ? a.B : a.H, inner = batch_heads ? a.H : a.B;
  const auto at = [&](const Heads& o, int i) { return o.p + i * (batch_heads ? o.sb : o.sh); };
  const auto stride = [&](const Heads& o) { return batch_heads ? o.sh : o.sb; };
  float* const out = const_cast<float*>(c.p);  // c comes from an MView or the scratch: writable
  for (int i = 0; i < outer; ++i)
    DLB_CUBLAS_CHECK(cublasSgemmStridedBatched(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m,
                                               k, &alpha, at(y, i), int(y.ld), stride(y), at(x, i), int(x.ld),
                                               stride(x), &beta, out + (at(c, i) - c.p), int(c.ld), stride(c), inner));
}

// Causal: the query rows in blocks of kCausalRows, block r multiplied against the keys its rows
// see, [0, min(Tk, end of block r)), not all Tk (the rest of its rows are masked: softmax reads only
// the first i + 1 columns of row i and writes zeros past them). Napkin math: nb blocks do
// (nb + 1) / (2 nb) of the full products' FLOPs: 62.5% at T 1024 (4 blocks), 53% at T 4096. Below
// two blocks, one (the full products).
constexpr int kCausalRows = 256;
struct Block {
  int q0, qn, kn;  // rows [q0, q0 + qn), keys [0, kn)
};
std::vector<Block> causal_blocks(const Attn& a) {
  if (!a.causal || a.Tq < 2 * kCausalRows) return {{0, a.Tq, a.Tk}};
  std::vector<Block> v;
  for (int q0 = 0; q0 < a.Tq; q0 += kCausalRows) {
    const int qn = std::min(kCausalRows, a.Tq - q0);
    v.push_back({q0, qn, std::min(a.Tk, q0 + qn)});
  }
  return v;
}

// ---- fused ----
constexpr int kWarps = 8;   // rows a block
constexpr int kTile = 32;   // rows of the other side a tile
constexpr int kMaxD = 128;  // 4 values a lane

struct Strides {
  long sb, sh, st;
};
template <class T>
__device__ __forceinline__ const T* head(const T* p, Strides s, int b, int h) {
  return p + b * s.sb + h * s.sh;
}
template <class T>
__device__ __forceinline__ T* head(T* p, Strides s, int b, int h) {
  return p + b * s.sb + h * s.sh;
}

struct FlashArgs {
  int H, Tq, Tk, D;
  bool causal;
  float scale;
  Strides q, k, v, o, g, dq, dk, dv;
};

// Rows [r0, r0 + kTile) of a head (zero past `rows`) into tile[kTile][D + 1].
template <class T>
__device__ void load_tile(const T* src, long st, int r0, int rows, int D, float* tile) {
  for (int e = threadIdx.x; e < kTile * D; e += blockDim.x) {
    const int r = e / D, d = e % D;
    tile[r * (D + 1) + d] = r0 + r < rows ? ldf(src, std::size_t(r0 + r) * st + d) : 0.f;
  }
}
// One row (D values, scaled) into a warp's shared row.
template <class T>
__device__ void load_row(const T* src, int D, float scale, float* row) {
  for (int d = threadIdx.x % 32; d < D; d += 32) row[d] = ldf(src, d) * scale;
  __syncwarp();
}
__device__ __forceinline__ float dot_row(const float* row, const float* tile_row, int D) {
  float s = 0.f;
  for (int d = 0; d < D; ++d) s += row[d] * tile_row[d];
  return s;
}
// Two tiles from rows [r0, r0 + kTile) of x and y, between barriers (the block's warps share them).
template <class T>
__device__ void load_tiles(const T* x, long xs, const T* y, long ys, int r0, int rows, int D, float* xt, float* yt) {
  __syncthreads();
  load_tile(x, xs, r0, rows, D, xt);
  load_tile(y, ys, r0, rows, D, yt);
  __syncthreads();
}
// acc[c] += sum over the tile's rows r of w_r (lane r's w) * tile[r][lane + 32 c].
__device__ __forceinline__ void accumulate_rows(float* acc, float w, const float* tile, int D) {
  const int lane = threadIdx.x % 32;
  for (int r = 0; r < kTile; ++r) {
    const float wr = __shfl_sync(0xffffffffu, w, r);
    for (int c = 0; c < 4; ++c)
      if (lane + 32 * c < D) acc[c] += wr * tile[r * (D + 1) + lane + 32 * c];
  }
}
template <class T>
__device__ __forceinline__ void store_row(T* dst, const float* acc, float scale, int D) {
  const int lane = threadIdx.x % 32;
  for (int c = 0; c < 4; ++c)
    if (lane + 32 * c < D) stf(dst, lane + 32 * c, acc[c] * scale);
}
// Keys the block's query rows see: all, or (causal) up to its last row.
__device__ __forceinline__ int key_end(const FlashArgs& a) {
  return a.causal ? min(a.Tk, min(a.Tq - 1, int(blockIdx.x) * kWarps + kWarps - 1) + 1) : a.Tk;
}

template <class T>
__global__ void flash_fwd_k(FlashArgs a, const T* q, const T* k, const T* v, T* o, float* lse) {
  extern __shared__ float sm[];
  const int D = a.D, warp = threadIdx.x / 32, lane = threadIdx.x % 32, bh = blockIdx.y, b = bh / a.H, h = bh % a.H;
  const int i = blockIdx.x * kWarps + warp;
  const bool active = i < a.Tq;
  float* kt = sm;
  float* vt = kt + kTile * (D + 1);
  float* qrow = vt + kTile * (D + 1) + warp * D;
  q = head(q, a.q, b, h), k = head(k, a.k, b, h), v = head(v, a.v, b, h), o = head(o, a.o, b, h);
  if (active) load_row(q + std::size_t(i) * a.q.st, D, a.scale, qrow);
  float acc[4] = {0.f, 0.f, 0.f, 0.f}, m = -INFINITY, l = 0.f;
  for (int j0 = 0, jend = key_end(a); j0 < jend; j0 += kTile) {
    load_tiles(k, a.k.st, v, a.v.st, j0, a.Tk, D, kt, vt);
    if (!active) continue;
    const int j = j0 + lane;
    const bool vis = j < a.Tk && (!a.causal || j <= i);
    const float sj = vis ? dot_row(qrow, kt + lane * (D + 1), D) : -INFINITY;
    const float mnew = fmaxf(m, warp_max(sj));
    if (mnew == -INFINITY) continue;  // nothing visible yet (warp-uniform)
    const float p = vis ? expf(sj - mnew) : 0.f, corr = expf(m - mnew);
    l = l * corr + warp_sum(p);
    for (int c = 0; c < 4; ++c) acc[c] *= corr;
    accumulate_rows(acc, p, vt, D);
    m = mnew;
  }
  if (!active) return;
  store_row(o + std::size_t(i) * a.o.st, acc, 1.f / l, D);
  if (lane == 0) lse[std::size_t(bh) * a.Tq + i] = m + logf(l);
}

// rowdot[bh, i] = dO_i . O_i (a warp a row).
template <class T>
__global__ void flash_rowdot_k(FlashArgs a, const T* o, const T* g, float* rowdot) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, bh = blockIdx.y, b = bh / a.H, h = bh % a.H;
  const int i = blockIdx.x * kWarps + warp;
  if (i >= a.Tq) return;
  o = head(o, a.o, b, h), g = head(g, a.g, b, h);
  float s = 0.f;
  for (int d = lane; d < a.D; d += 32) s += ldf(o, std::size_t(i) * a.o.st + d) * ldf(g, std::size_t(i) * a.g.st + d);
  s = warp_sum(s);
  if (lane == 0) rowdot[std::size_t(bh) * a.Tq + i] = s;
}

// dQ: a warp per query row i, over key tiles: p = exp(s - lse), ds = p (dO.v - rowdot) scale,
// dq += ds k.
template <class T>
__global__ void flash_dq_k(FlashArgs a, const T* q, const T* k, const T* v, const T* g, const float* lse,
                           const float* rowdot, T* dq) {
  extern __shared__ float sm[];
  const int D = a.D, warp = threadIdx.x / 32, lane = threadIdx.x % 32, bh = blockIdx.y, b = bh / a.H, h = bh % a.H;
  const int i = blockIdx.x * kWarps + warp;
  const bool active = i < a.Tq;
  float* kt = sm;
  float* vt = kt + kTile * (D + 1);
  float* qrow = vt + kTile * (D + 1) + warp * 2 * D;
  float* grow = qrow + D;
  q = head(q, a.q, b, h), k = head(k, a.k, b, h), v = head(v, a.v, b, h), g = head(g, a.g, b, h);
  dq = head(dq, a.dq, b, h);
  float li = 0.f, ri = 0.f;
  if (active) {
    load_row(q + std::size_t(i) * a.q.st, D, a.scale, qrow);
    load_row(g + std::size_t(i) * a.g.st, D, 1.f, grow);
    li = lse[std::size_t(bh) * a.Tq + i], ri = rowdot[std::size_t(bh) * a.Tq + i];
  }
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int j0 = 0, jend = key_end(a); j0 < jend; j0 += kTile) {
    load_tiles(k, a.k.st, v, a.v.st, j0, a.Tk, D, kt, vt);
    if (!active) continue;
    const int j = j0 + lane;
    const bool vis = j < a.Tk && (!a.causal || j <= i);
    float ds = 0.f;
    if (vis) {
      const float p = expf(dot_row(qrow, kt + lane * (D + 1), D) - li);
      ds = p * (dot_row(grow, vt + lane * (D + 1), D) - ri) * a.scale;
    }
    accumulate_rows(acc, ds, kt, D);
  }
  if (active) store_row(dq + std::size_t(i) * a.dq.st, acc, 1.f, D);
}

// dK, dV: a warp per key row j, over query tiles: dv += p dO_i, dk += ds q_i.
template <class T>
__global__ void flash_dkv_k(FlashArgs a, const T* q, const T* k, const T* v, const T* g, const float* lse,
                            const float* rowdot, T* dk, T* dv) {
  extern __shared__ float sm[];
  const int D = a.D, warp = threadIdx.x / 32, lane = threadIdx.x % 32, bh = blockIdx.y, b = bh / a.H, h = bh % a.H;
  const int j = blockIdx.x * kWarps + warp;
  const bool active = j < a.Tk;
  float* qt = sm;  // unscaled q rows
  float* gt = qt + kTile * (D + 1);
  float* lt = gt + kTile * (D + 1);
  float* rt = lt + kTile;
  float* krow = rt + kTile + warp * 2 * D;  // scaled k row, then the v row
  float* vrow = krow + D;
  q = head(q, a.q, b, h), k = head(k, a.k, b, h), v = head(v, a.v, b, h), g = head(g, a.g, b, h);
  dk = head(dk, a.dk, b, h), dv = head(dv, a.dv, b, h);
  if (active) {
    load_row(k + std::size_t(j) * a.k.st, D, a.scale, krow);
    load_row(v + std::size_t(j) * a.v.st, D, 1.f, vrow);
  }
  float ak[4] = {0.f, 0.f, 0.f, 0.f}, av[4] = {0.f, 0.f, 0.f, 0.f};
  const int first = int(blockIdx.x) * kWarps;  // the block's first key: queries before it see none
  for (int i0 = a.causal ? first / kTile * kTile : 0; i0 < a.Tq; i0 += kTile) {
    __syncthreads();  // every warp is done with the previous tile's lse / rowdot
    if (threadIdx.x < kTile) {  // (read after load_tiles' second barrier)
      const bool in = i0 + int(threadIdx.x) < a.Tq;
      lt[threadIdx.x] = in ? lse[std::size_t(bh) * a.Tq + i0 + threadIdx.x] : 0.f;
      rt[threadIdx.x] = in ? rowdot[std::size_t(bh) * a.Tq + i0 + threadIdx.x] : 0.f;
    }
    load_tiles(q, a.q.st, g, a.g.st, i0, a.Tq, D, qt, gt);
    if (!active) continue;
    const int i = i0 + lane;
    const bool vis = i < a.Tq && (!a.causal || j <= i);
    float p = 0.f, ds = 0.f;
    if (vis) {
      p = expf(dot_row(krow, qt + lane * (D + 1), D) - lt[lane]);
      ds = p * (dot_row(vrow, gt + lane * (D + 1), D) - rt[lane]) * a.scale;
    }
    accumulate_rows(av, p, gt, D);
    accumulate_rows(ak, ds, qt, D);
  }
  if (!active) return;
  store_row(dk + std::size_t(j) * a.dk.st, ak, 1.f, D);
  store_row(dv + std::size_t(j) * a.dv.st, av, 1.f, D);
}

FlashArgs flash_args(const Attn& a) {
  a.check();
  if (a.dropout > 0) throw std::invalid_argument("attention: flash has no dropout (use unfused)");
  if (a.D > kMaxD)
    throw Unsupported("attention: the GPU flash kernels take head dims up to 128, not " + std::to_string(a.D));
  FlashArgs f{};
  f.H = a.H, f.Tq = a.Tq, f.Tk = a.Tk, f.D = a.D, f.causal = a.causal, f.scale = a.sc();
  return f;
}
Strides strides(const AnyView& v) { return {v.sb, v.sh, v.st}; }
Strides strides(const AnyMView& v) { return {v.sb, v.sh, v.st}; }

template <class F>
void with_storage(DType t, F&& f) {
  if (t == DType::fp32) return f(float{});
  if (t == DType::bf16) return f(__nv_bfloat16{});
  throw Unsupported(std::string("attention: no ") + dtype_name(t) + " flash kernel on the GPU (fp32, bf16)");
}
template <class T>
const T* c_(const void* p) {
  return static_cast<const T*>(p);
}
template <class T>
T* m_(void* p) {
  return static_cast<T*>(p);
}

}  // namespace

void attention_forward_unfused(const Attn& a, CView q, CView k, CView v, MView o, float* probs, cudaStream_t s,
                               const std::uint64_t* offset_add) {
  a.check();
  cublasHandle_t h = cublas_handle_on(s);
  const std::vector<Block> blocks = causal_blocks(a);
  const Heads P = probs_of(probs, a);
  for (const Block& r : blocks)  // S = s Q K^T
    gemm_bh(h, a, false, true, r.qn, r.kn, a.D, a.sc(), rows_from(heads(q), r.q0), heads(k), rows_from(P, r.q0));
  softmax_forward(probs, probs, long(a.B) * a.H * a.Tq, a.Tk, a.causal ? a.Tq : 0, s);
  const float* pd = probs;
  if (a.dropout > 0) {  // P after dropout into the second half (the CPU's element indices: one stream over P)
    const std::size_t n = std::size_t(a.B) * a.H * a.Tq * a.Tk;
    dropout_forward(probs, probs + n, nullptr, n, a.dropout, a.seed, a.offset, DType::fp32, s, offset_add);
    pd = probs + n;
  }
  const Heads Pd = probs_of(pd, a);
  for (const Block& r : blocks)  // O = P V
    gemm_bh(h, a, false, false, r.qn, a.D, r.kn, 1.f, rows_from(Pd, r.q0), heads(v), rows_from(heads(o), r.q0));
}

// dV and dK sum over the query blocks: the last block first over all Tk keys (P and dS are zero past
// each row's keys, so that block writes every row of dV, dK), the others added into their keys' rows.
void attention_backward_unfused(const Attn& a, CView q, CView k, CView v, CView dout, const float* probs, MView dq,
                                MView dk, MView dv, float* scratch, cudaStream_t s, const std::uint64_t* offset_add) {
  a.check();
  cublasHandle_t h = cublas_handle_on(s);
  float* dp = scratch;
  const std::size_t n = std::size_t(a.B) * a.H * a.Tq * a.Tk;
  const Heads p = probs_of(a.dropout > 0 ? probs + n : probs, a), ds = probs_of(dp, a);
  const std::vector<Block> blocks = causal_blocks(a);
  for (std::size_t i = blocks.size(); i-- > 0;) {
    const Block& r = blocks[i];
    const bool last = i + 1 == blocks.size();
    const int kn = last ? a.Tk : r.kn;
    gemm_bh(h, a, true, false, kn, a.D, r.qn, 1.f, rows_from(p, r.q0), rows_from(heads(dout), r.q0), heads(dv),
            last ? 0.f : 1.f);  // dV += P^T dO
    gemm_bh(h, a, false, true, r.qn, r.kn, a.D, 1.f, rows_from(heads(dout), r.q0), heads(v),
            rows_from(ds, r.q0));  // dP = dO V^T
  }
  if (a.dropout > 0) dropout_backward(dp, dp, n, a.dropout, a.seed, a.offset, DType::fp32, s, offset_add);
  softmax_backward(probs, dp, dp, long(a.B) * a.H * a.Tq, a.Tk, a.causal ? a.Tq : 0, s);  // dS
  for (std::size_t i = blocks.size(); i-- > 0;) {
    const Block& r = blocks[i];
    const bool last = i + 1 == blocks.size();
    gemm_bh(h, a, false, false, r.qn, a.D, r.kn, a.sc(), rows_from(ds, r.q0), heads(k), rows_from(heads(dq), r.q0));
    gemm_bh(h, a, true, false, last ? a.Tk : r.kn, a.D, r.qn, a.sc(), rows_from(ds, r.q0), rows_from(heads(q), r.q0),
            heads(dk), last ? 0.f : 1.f);  // dQ = s dS K, dK += s dS^T Q
  }
}

void attention_forward_flash(const Attn& a, AnyView q, AnyView k, AnyView v, AnyMView o, float* lse, DType t,
                             cudaStream_t s) {
  FlashArgs f = flash_args(a);
  f.q = strides(q), f.k = strides(k), f.v = strides(v), f.o = strides(o);
  const dim3 grid((a.Tq + kWarps - 1) / kWarps, a.B * a.H);
  const std::size_t smem = sizeof(float) * (2 * kTile * (a.D + 1) + kWarps * a.D);
  with_storage(t, [&](auto z) {
    using T = decltype(z);
    flash_fwd_k<T><<<grid, 32 * kWarps, smem, s>>>(f, c_<T>(q.p), c_<T>(k.p), c_<T>(v.p), m_<T>(o.p), lse);
  });
  check_launch();
}

void attention_backward_flash(const Attn& a, AnyView q, AnyView k, AnyView v, AnyView o, AnyView dout, const float* lse,
                              AnyMView dq, AnyMView dk, AnyMView dv, float* scratch, DType t, cudaStream_t s) {
  FlashArgs f = flash_args(a);
  f.q = strides(q), f.k = strides(k), f.v = strides(v), f.o = strides(o), f.g = strides(dout);
  f.dq = strides(dq), f.dk = strides(dk), f.dv = strides(dv);
  const dim3 qgrid((a.Tq + kWarps - 1) / kWarps, a.B * a.H), kgrid((a.Tk + kWarps - 1) / kWarps, a.B * a.H);
  const std::size_t smem_q = sizeof(float) * (2 * kTile * (a.D + 1) + 2 * kWarps * a.D);
  const std::size_t smem_k = sizeof(float) * (2 * kTile * (a.D + 1) + 2 * kTile + 2 * kWarps * a.D);
  with_storage(t, [&](auto z) {
    using T = decltype(z);
    flash_rowdot_k<T><<<qgrid, 32 * kWarps, 0, s>>>(f, c_<T>(o.p), c_<T>(dout.p), scratch);
    flash_dq_k<T><<<qgrid, 32 * kWarps, smem_q, s>>>(f, c_<T>(q.p), c_<T>(k.p), c_<T>(v.p), c_<T>(dout.p), lse, scratch,
                                                     m_<T>(dq.p));
    flash_dkv_k<T><<<kgrid, 32 * kWarps, smem_k, s>>>(f, c_<T>(q.p), c_<T>(k.p), c_<T>(v.p), c_<T>(dout.p), lse,
                                                      scratch, m_<T>(dk.p), m_<T>(dv.p));
  });
  check_launch();
}

const std::vector<FlashKernel>& flash_kernels() {
  static const std::vector<FlashKernel> rows = {
      {"flash", DType::fp32, false, kMaxD, attention_forward_flash, attention_backward_flash},
      {"flash", DType::bf16, false, kMaxD, attention_forward_flash, attention_backward_flash},
      {"flash_tc", DType::bf16, true, 128, attention_forward_flash_tc, attention_backward_flash_tc},
      {"flash_tc_pipe", DType::bf16, true, 128, attention_forward_flash_tc_pipe, attention_backward_flash_tc},
  };
  return rows;
}

}  // namespace dlb::cuda::seq
