// Fused attention on the tensor cores (bf16 mma.sync.m16n8k16, fp32 accumulation; sm_80 and sm_90),
// FlashAttention-2's tiling: a block of 4 warps owns 64 rows of one (b, h), each warp 16 of them, and
// walks 64-row tiles of the other side through shared memory.
//   forward  a query block; per key tile S = Q K^T (scaled, masked), the online max and sum per row
//            (exp2 on log2e-scaled scores), P rounded to bf16 straight from the S accumulators into
//            mma A fragments (the C layout of two n8 tiles is the A layout of one k16 step), O += P V;
//            O / l stored in bf16, the row log-sum-exp (natural log) kept for backward.
//   backward deterministic, no atomics, as the fp32 kernels: rowdot = dO . O per query; a dQ kernel
//            over query blocks (S, dP = dO V^T, dQ += dS K: 3 tile GEMMs) and a dK/dV kernel over key
//            blocks (S^T, dP^T = V dO^T, dV += P^T dO, dK += dS^T Q: 4), so 7 tile GEMMs against the
//            5 of FlashAttention-2's atomic dQ.
// flash_tc_pipe: the same forward with the next K/V tile copied (cp.async) while this one is used.
// Napkin math (gpt2-124m, B=16 T=1024 H=12 D=64, causal): forward 4 B H T^2 D / 2 = 206 GFLOP, 0.26 ms
// at an H100's ~800 dense bf16 TFLOP/s; bytes: Q, K, V, O once (4 x 25 MB) plus each K/V tile re-read
// by T/64 query blocks from L2. Shared memory per block: 2 tiles (forward) or 4 tiles (backward) of
// 64 x (D + 8) bf16 (rows padded by 16 bytes: the 8 rows a fragment load touches hit distinct banks).
// Rows must be 16-byte aligned (D, the row stride and the bases multiples of 8 elements).
#include <cuda_bf16.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/common/errors.h"
#include "kernels/cuda/seq/attention.h"
#include "kernels/cuda/seq/common.cuh"

namespace dlb::cuda::seq {
namespace {

constexpr int kRows = 64;   // rows a block owns (16 a warp)
constexpr int kTileTc = 64;  // rows of the other side a tile
constexpr int kWarpsTc = 4;
constexpr float kLog2e = 1.4426950408889634f;
using bf16 = __nv_bfloat16;

struct TcStrides {
  long sb, sh, st;
};
struct TcArgs {
  int H, Tq, Tk;
  bool causal;
  float scale_log2;  // softmax scale * log2(e)
  float scale;
  TcStrides q, k, v, o, g, dq, dk, dv;
};

template <int D>
struct Tile {
  static constexpr int kLd = D + 8;  // padded row, bf16 elements
  static constexpr int kElems = kTileTc * kLd;
};

__device__ __forceinline__ std::uint32_t ld32(const bf16* p) { return *reinterpret_cast<const std::uint32_t*>(p); }
__device__ __forceinline__ std::uint32_t pack(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}
// c += a b on one m16n8k16 tile (row-major A, column-major B, fp32 C).
__device__ __forceinline__ void mma(float* c, const std::uint32_t* a, std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// Fragment loads from a padded tile t[row][ld] (lane = 4 g + q4: g the row group, q4 the pair):
// A of rows r0..r0+15, k columns c0..c0+15.
template <int Ld>
__device__ __forceinline__ void load_a(std::uint32_t* a, const bf16* t, int r0, int c0) {
  const int g = threadIdx.x % 32 / 4, q4 = threadIdx.x % 4;
  a[0] = ld32(t + (r0 + g) * Ld + c0 + 2 * q4);
  a[1] = ld32(t + (r0 + g + 8) * Ld + c0 + 2 * q4);
  a[2] = ld32(t + (r0 + g) * Ld + c0 + 8 + 2 * q4);
  a[3] = ld32(t + (r0 + g + 8) * Ld + c0 + 8 + 2 * q4);
}
// B = t^T: B[k][n] = t[n0 + n][k0 + k] (K for Q K^T: the tile's rows are B's columns).
template <int Ld>
__device__ __forceinline__ void load_bt(std::uint32_t& b0, std::uint32_t& b1, const bf16* t, int n0, int k0) {
  const int g = threadIdx.x % 32 / 4, q4 = threadIdx.x % 4;
  b0 = ld32(t + (n0 + g) * Ld + k0 + 2 * q4);
  b1 = ld32(t + (n0 + g) * Ld + k0 + 8 + 2 * q4);
}
// B = t: B[k][n] = t[k0 + k][n0 + n] for two n8 tiles (n0, n0 + 8), by ldmatrix .trans: lanes 0-15
// address rows k0..k0+15 at column n0, lanes 16-31 the same rows at n0 + 8.
template <int Ld>
__device__ __forceinline__ void load_b2(std::uint32_t* b, const bf16* t, int k0, int n0) {
  const int lane = threadIdx.x % 32;
  const auto addr = static_cast<std::uint32_t>(__cvta_generic_to_shared(t + (k0 + (lane & 15)) * Ld + n0 + (lane >> 4) * 8));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
               : "r"(addr));
}

// B = t^T for two n8 tiles (n0, n0 + 8) at k columns k0..k0+15 by one ldmatrix (not .trans): b[0],
// b[1] tile n0's, b[2], b[3] tile n0 + 8's -- load_bt's fragments, a quarter of the instructions. Lane
// l addresses row l & 7 of matrix l >> 3: (n0, k0), (n0, k0 + 8), (n0 + 8, k0), (n0 + 8, k0 + 8).
template <int Ld>
__device__ __forceinline__ void load_bt2(std::uint32_t* b, const bf16* t, int n0, int k0) {
  const int lane = threadIdx.x % 32, m = lane >> 3;
  const auto addr =
      static_cast<std::uint32_t>(__cvta_generic_to_shared(t + (n0 + (m >> 1) * 8 + (lane & 7)) * Ld + k0 + (m & 1) * 8));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3])
               : "r"(addr));
}

// 16 bytes global -> shared without the registers (sm_80 cp.async; zero-filled when !valid, src unread).
__device__ __forceinline__ void cp_async16(bf16* dst, const bf16* src, bool valid) {
  const auto d = static_cast<std::uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>  // until at most N of this thread's groups are in flight
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Rows [r0, r0 + 64) of a head (zero past `rows`) into a padded tile, 16 bytes a thread a step.
template <int D>
__device__ void load_tile(const bf16* src, long st, int r0, int rows, bf16* t) {
  constexpr int kChunks = D / 8;
  for (int e = threadIdx.x; e < kTileTc * kChunks; e += blockDim.x) {
    const int r = e / kChunks, c = e % kChunks;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r0 + r < rows) v = *reinterpret_cast<const uint4*>(src + std::size_t(r0 + r) * st + c * 8);
    *reinterpret_cast<uint4*>(t + r * Tile<D>::kLd + c * 8) = v;
  }
}
// load_tile's copy issued as cp.async (one group per call site's commit), for the pipelined forward.
template <int D>
__device__ void load_tile_async(const bf16* src, long st, int r0, int rows, bf16* t) {
  constexpr int kChunks = D / 8;
  for (int e = threadIdx.x; e < kTileTc * kChunks; e += blockDim.x) {
    const int r = e / kChunks, c = e % kChunks;
    const bool ok = r0 + r < rows;
    cp_async16(t + r * Tile<D>::kLd + c * 8, src + std::size_t(ok ? r0 + r : 0) * st + c * 8, ok);
  }
}
template <class T>
__device__ __forceinline__ T* head_of(T* p, TcStrides s, int b, int h) {
  return p + b * s.sb + h * s.sh;
}
// Whether key j is visible to query i.
__device__ __forceinline__ bool visible(const TcArgs& a, int i, int j) { return j < a.Tk && (!a.causal || j <= i); }

// ---- forward ----
// kPipe false: each K/V tile loaded, then used (two barriers a tile; other blocks on the SM hide the
// load). kPipe true ("flash_tc_pipe", an ablation row): tile j + 1's K and V copied by cp.async
// while tile j is used (two stages, 4 tiles of shared memory: 36 KB at D 64), and K's fragments by
// ldmatrix (load_bt2: 16 instructions a tile, not 64).
template <int D, bool kPipe>
__global__ void __launch_bounds__(128) flash_tc_fwd_k(TcArgs a, const bf16* q, const bf16* k, const bf16* v, bf16* o,
                                                      float* lse) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* ks = reinterpret_cast<bf16*>(smem_raw);
  bf16* vs = ks + Tile<D>::kElems;
  constexpr int Ld = Tile<D>::kLd;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q4 = lane % 4;
  const int bh = blockIdx.y, b = bh / a.H, h = bh % a.H;
  const int q0 = (gridDim.x - 1 - blockIdx.x) * kRows;  // the longest causal rows first
  q = head_of(q, a.q, b, h), k = head_of(k, a.k, b, h), v = head_of(v, a.v, b, h), o = head_of(o, a.o, b, h);

  std::uint32_t qa[D / 16][4];  // this warp's 16 query rows as A fragments (Q staged through ks)
  load_tile<D>(q, a.q.st, q0, a.Tq, ks);
  __syncthreads();
  for (int kk = 0; kk < D / 16; ++kk) load_a<Ld>(qa[kk], ks, warp * 16, kk * 16);

  const int i_lo = q0 + warp * 16 + g, i_hi = i_lo + 8;  // the two rows this thread holds
  float acc[D / 8][4] = {};
  float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.f, l_hi = 0.f;  // l: this thread's partial sums
  const int kend = a.causal ? min(a.Tk, q0 + kRows) : a.Tk;
  // Key tile j0 (in kt, vt) into the running max, sums and O.
  const auto tile = [&](int j0, const bf16* kt, const bf16* vt) {
    float s[kTileTc / 8][4] = {};
    for (int kk = 0; kk < D / 16; ++kk)
      if constexpr (kPipe) {
        for (int n = 0; n < kTileTc / 8; n += 2) {
          std::uint32_t bk[4];
          load_bt2<Ld>(bk, kt, n * 8, kk * 16);
          mma(s[n], qa[kk], bk[0], bk[1]);
          mma(s[n + 1], qa[kk], bk[2], bk[3]);
        }
      } else {
        for (int n = 0; n < kTileTc / 8; ++n) {
          std::uint32_t b0, b1;
          load_bt<Ld>(b0, b1, kt, n * 8, kk * 16);
          mma(s[n], qa[kk], b0, b1);
        }
      }
    const bool edge = j0 + kTileTc > a.Tk || (a.causal && j0 + kTileTc - 1 > q0 + warp * 16);
    float mx_lo = m_lo, mx_hi = m_hi;
    for (int n = 0; n < kTileTc / 8; ++n)
      for (int e = 0; e < 2; ++e) {
        const int j = j0 + n * 8 + 2 * q4 + e;
        s[n][e] = edge && !visible(a, i_lo, j) ? -INFINITY : s[n][e] * a.scale_log2;
        s[n][2 + e] = edge && !visible(a, i_hi, j) ? -INFINITY : s[n][2 + e] * a.scale_log2;
        mx_lo = fmaxf(mx_lo, s[n][e]), mx_hi = fmaxf(mx_hi, s[n][2 + e]);
      }
    for (int o_ = 1; o_ < 4; o_ <<= 1) {  // the quad holding a row
      mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, o_));
      mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, o_));
    }
    // Key 0 is in the first tile and visible to every row, so the maxima are finite from here on.
    const float c_lo = exp2f(m_lo - mx_lo), c_hi = exp2f(m_hi - mx_hi);
    m_lo = mx_lo, m_hi = mx_hi;
    l_lo *= c_lo, l_hi *= c_hi;
    for (int n = 0; n < D / 8; ++n) acc[n][0] *= c_lo, acc[n][1] *= c_lo, acc[n][2] *= c_hi, acc[n][3] *= c_hi;
    for (int kk = 0; kk < kTileTc / 16; ++kk) {
      std::uint32_t pa[4];
      float p[2][4];
      for (int half = 0; half < 2; ++half)
        for (int e = 0; e < 2; ++e) {
          p[half][e] = exp2f(s[2 * kk + half][e] - m_lo);
          p[half][2 + e] = exp2f(s[2 * kk + half][2 + e] - m_hi);
          l_lo += p[half][e], l_hi += p[half][2 + e];
        }
      pa[0] = pack(p[0][0], p[0][1]), pa[1] = pack(p[0][2], p[0][3]);
      pa[2] = pack(p[1][0], p[1][1]), pa[3] = pack(p[1][2], p[1][3]);
      for (int n = 0; n < D / 8; n += 2) {
        std::uint32_t bv[4];
        load_b2<Ld>(bv, vt, kk * 16, n * 8);
        mma(acc[n], pa, bv[0], bv[1]);
        mma(acc[n + 1], pa, bv[2], bv[3]);
      }
    }
  };
  if constexpr (kPipe) {
    // Stage st holds K at ks + 2 st kElems and V after it; tile it + 1 is in flight while tile it is used.
    constexpr int kStage = 2 * Tile<D>::kElems;
    const int ntiles = (kend + kTileTc - 1) / kTileTc;
    __syncthreads();  // every warp holds its Q fragments before stage 0 is overwritten
    load_tile_async<D>(k, a.k.st, 0, a.Tk, ks);
    load_tile_async<D>(v, a.v.st, 0, a.Tk, vs);
    cp_async_commit();
    for (int it = 0; it < ntiles; ++it) {
      if (it + 1 < ntiles) {  // its stage was last read in iteration it - 1, behind that one's last barrier
        bf16* const kn = ks + ((it + 1) & 1) * kStage;
        load_tile_async<D>(k, a.k.st, (it + 1) * kTileTc, a.Tk, kn);
        load_tile_async<D>(v, a.v.st, (it + 1) * kTileTc, a.Tk, kn + Tile<D>::kElems);
        cp_async_commit();
        cp_async_wait<1>();  // this thread's copies of tile it have landed
      } else {
        cp_async_wait<0>();
      }
      __syncthreads();  // and every thread's
      const bf16* const kc = ks + (it & 1) * kStage;
      tile(it * kTileTc, kc, kc + Tile<D>::kElems);
      __syncthreads();  // every warp is done with this stage before it is refilled
    }
  } else {
    for (int j0 = 0; j0 < kend; j0 += kTileTc) {
      __syncthreads();  // every warp is done with the previous tile (and with Q in ks)
      load_tile<D>(k, a.k.st, j0, a.Tk, ks);
      load_tile<D>(v, a.v.st, j0, a.Tk, vs);
      __syncthreads();
      tile(j0, ks, vs);
    }
  }
  for (int o_ = 1; o_ < 4; o_ <<= 1) {
    l_lo += __shfl_xor_sync(0xffffffffu, l_lo, o_);
    l_hi += __shfl_xor_sync(0xffffffffu, l_hi, o_);
  }
  const float r_lo = 1.f / l_lo, r_hi = 1.f / l_hi;
  for (int n = 0; n < D / 8; ++n) {
    const int d = n * 8 + 2 * q4;
    if (i_lo < a.Tq)
      *reinterpret_cast<__nv_bfloat162*>(o + std::size_t(i_lo) * a.o.st + d) =
          __floats2bfloat162_rn(acc[n][0] * r_lo, acc[n][1] * r_lo);
    if (i_hi < a.Tq)
      *reinterpret_cast<__nv_bfloat162*>(o + std::size_t(i_hi) * a.o.st + d) =
          __floats2bfloat162_rn(acc[n][2] * r_hi, acc[n][3] * r_hi);
  }
  if (q4 == 0) {
    if (i_lo < a.Tq) lse[std::size_t(bh) * a.Tq + i_lo] = (m_lo + log2f(l_lo)) / kLog2e;
    if (i_hi < a.Tq) lse[std::size_t(bh) * a.Tq + i_hi] = (m_hi + log2f(l_hi)) / kLog2e;
  }
}

// ---- backward ----
// rowdot[bh, i] = dO_i . O_i in fp32 (a warp a row).
__global__ void flash_tc_rowdot_k(TcArgs a, int D, const bf16* o, const bf16* g, float* rowdot) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, bh = blockIdx.y, b = bh / a.H, h = bh % a.H;
  const int i = blockIdx.x * (blockDim.x / 32) + warp;
  if (i >= a.Tq) return;
  o = head_of(o, a.o, b, h) + std::size_t(i) * a.o.st, g = head_of(g, a.g, b, h) + std::size_t(i) * a.g.st;
  float s = 0.f;
  for (int d = lane; d < D; d += 32) s += __bfloat162float(o[d]) * __bfloat162float(g[d]);
  s = warp_sum(s);
  if (lane == 0) rowdot[std::size_t(bh) * a.Tq + i] = s;
}

// P (or P^T) and dS (or dS^T) of one 16 x 64 warp tile from the S and dP accumulators, in place:
// s -> p, dp -> ds. Row r / column c of element e: (rows_are_queries ? query : key) indices.
template <bool kQueriesInRows>
__device__ __forceinline__ void p_and_ds(const TcArgs& a, float (*s)[4], float (*dp)[4], int r_lo, int c0,
                                         const float* lse_l2, const float* rowdot) {
  const int q4 = threadIdx.x % 4;
  for (int n = 0; n < kTileTc / 8; ++n)
    for (int e = 0; e < 4; ++e) {
      const int r = r_lo + (e >= 2 ? 8 : 0), c = c0 + n * 8 + 2 * q4 + (e & 1);
      const int i = kQueriesInRows ? r : c, j = kQueriesInRows ? c : r;
      const int il = kQueriesInRows ? (e >= 2 ? 1 : 0) : n * 8 + 2 * q4 + (e & 1);  // index into lse_l2 / rowdot
      const bool vis = i < a.Tq && visible(a, i, j);
      const float p = vis ? exp2f(s[n][e] * a.scale_log2 - lse_l2[il]) : 0.f;
      s[n][e] = p;
      dp[n][e] = p * (dp[n][e] - rowdot[il]) * a.scale;
    }
}
// acc[D/8] += X^T-free product: A fragments from the 16 x 64 accumulator tile x (C layout), B from
// tile t rows k (64) x D columns.
template <int D>
__device__ __forceinline__ void acc_from_c(float (*acc)[4], const float (*x)[4], const bf16* t) {
  for (int kk = 0; kk < kTileTc / 16; ++kk) {
    const std::uint32_t xa[4] = {pack(x[2 * kk][0], x[2 * kk][1]), pack(x[2 * kk][2], x[2 * kk][3]),
                                 pack(x[2 * kk + 1][0], x[2 * kk + 1][1]), pack(x[2 * kk + 1][2], x[2 * kk + 1][3])};
    for (int n = 0; n < D / 8; n += 2) {
      std::uint32_t bt[4];
      load_b2<Tile<D>::kLd>(bt, t, kk * 16, n * 8);
      mma(acc[n], xa, bt[0], bt[1]);
      mma(acc[n + 1], xa, bt[2], bt[3]);
    }
  }
}
// c[64/8] = (rows r0.. of x, 16 x D) times (tile y, 64 x D)^T.
template <int D>
__device__ __forceinline__ void tile_abt(float (*c)[4], const bf16* x, int r0, const bf16* y) {
  for (int n = 0; n < kTileTc / 8; ++n) c[n][0] = c[n][1] = c[n][2] = c[n][3] = 0.f;
  for (int kk = 0; kk < D / 16; ++kk) {
    std::uint32_t xa[4];
    load_a<Tile<D>::kLd>(xa, x, r0, kk * 16);
    for (int n = 0; n < kTileTc / 8; ++n) {
      std::uint32_t b0, b1;
      load_bt<Tile<D>::kLd>(b0, b1, y, n * 8, kk * 16);
      mma(c[n], xa, b0, b1);
    }
  }
}
template <int D>
__device__ __forceinline__ void store_acc(bf16* dst, long st, int r_lo, int rows, const float (*acc)[4]) {
  const int q4 = threadIdx.x % 4;
  for (int n = 0; n < D / 8; ++n) {
    const int d = n * 8 + 2 * q4;
    if (r_lo < rows)
      *reinterpret_cast<__nv_bfloat162*>(dst + std::size_t(r_lo) * st + d) = __floats2bfloat162_rn(acc[n][0], acc[n][1]);
    if (r_lo + 8 < rows)
      *reinterpret_cast<__nv_bfloat162*>(dst + std::size_t(r_lo + 8) * st + d) = __floats2bfloat162_rn(acc[n][2], acc[n][3]);
  }
}

// dQ over a query block: per key tile S = Q K^T, dP = dO V^T, dS, dQ += dS K.
template <int D>
__global__ void __launch_bounds__(128) flash_tc_dq_k(TcArgs a, const bf16* q, const bf16* k, const bf16* v,
                                                     const bf16* g, const float* lse, const float* rowdot, bf16* dq) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* qs = reinterpret_cast<bf16*>(smem_raw);
  bf16* gs = qs + Tile<D>::kElems;
  bf16* ks = gs + Tile<D>::kElems;
  bf16* vs = ks + Tile<D>::kElems;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gr = lane / 4;
  const int bh = blockIdx.y, b = bh / a.H, h = bh % a.H;
  const int q0 = (gridDim.x - 1 - blockIdx.x) * kRows;
  q = head_of(q, a.q, b, h), k = head_of(k, a.k, b, h), v = head_of(v, a.v, b, h), g = head_of(g, a.g, b, h);
  dq = head_of(dq, a.dq, b, h);
  load_tile<D>(q, a.q.st, q0, a.Tq, qs);
  load_tile<D>(g, a.g.st, q0, a.Tq, gs);
  const int i_lo = q0 + warp * 16 + gr;
  float lse_l2[2], rd[2];
  for (int e = 0; e < 2; ++e) {
    const int i = i_lo + 8 * e;
    lse_l2[e] = i < a.Tq ? lse[std::size_t(bh) * a.Tq + i] * kLog2e : 0.f;
    rd[e] = i < a.Tq ? rowdot[std::size_t(bh) * a.Tq + i] : 0.f;
  }
  float acc[D / 8][4] = {};
  const int kend = a.causal ? min(a.Tk, q0 + kRows) : a.Tk;
  for (int j0 = 0; j0 < kend; j0 += kTileTc) {
    __syncthreads();
    load_tile<D>(k, a.k.st, j0, a.Tk, ks);
    load_tile<D>(v, a.v.st, j0, a.Tk, vs);
    __syncthreads();
    float s[kTileTc / 8][4], dp[kTileTc / 8][4];
    tile_abt<D>(s, qs, warp * 16, ks);
    tile_abt<D>(dp, gs, warp * 16, vs);
    p_and_ds<true>(a, s, dp, i_lo, j0, lse_l2, rd);
    acc_from_c<D>(acc, dp, ks);
  }
  store_acc<D>(dq, a.dq.st, i_lo, a.Tq, acc);
}

// dK, dV over a key block: per query tile S^T = K Q^T, dP^T = V dO^T, dV += P^T dO, dK += dS^T Q.
template <int D>
__global__ void __launch_bounds__(128) flash_tc_dkv_k(TcArgs a, const bf16* q, const bf16* k, const bf16* v,
                                                      const bf16* g, const float* lse, const float* rowdot, bf16* dk,
                                                      bf16* dv) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* ks = reinterpret_cast<bf16*>(smem_raw);
  bf16* vs = ks + Tile<D>::kElems;
  bf16* qs = vs + Tile<D>::kElems;
  bf16* gs = qs + Tile<D>::kElems;
  float* lt = reinterpret_cast<float*>(gs + Tile<D>::kElems);  // the query tile's lse * log2e
  float* rt = lt + kTileTc;                                     // and rowdot
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gr = lane / 4;
  const int bh = blockIdx.y, b = bh / a.H, h = bh % a.H;
  const int j0 = (gridDim.x - 1 - blockIdx.x) * kRows;
  q = head_of(q, a.q, b, h), k = head_of(k, a.k, b, h), v = head_of(v, a.v, b, h), g = head_of(g, a.g, b, h);
  dk = head_of(dk, a.dk, b, h), dv = head_of(dv, a.dv, b, h);
  load_tile<D>(k, a.k.st, j0, a.Tk, ks);
  load_tile<D>(v, a.v.st, j0, a.Tk, vs);
  const int j_lo = j0 + warp * 16 + gr;
  float ak[D / 8][4] = {}, av[D / 8][4] = {};
  // Causal: query i sees key j iff j <= i, so the tiles before the one holding query j0 see none.
  for (int i0 = a.causal ? j0 / kTileTc * kTileTc : 0; i0 < a.Tq; i0 += kTileTc) {
    __syncthreads();
    load_tile<D>(q, a.q.st, i0, a.Tq, qs);
    load_tile<D>(g, a.g.st, i0, a.Tq, gs);
    if (threadIdx.x < kTileTc) {
      const int i = i0 + int(threadIdx.x);
      lt[threadIdx.x] = i < a.Tq ? lse[std::size_t(bh) * a.Tq + i] * kLog2e : 0.f;
      rt[threadIdx.x] = i < a.Tq ? rowdot[std::size_t(bh) * a.Tq + i] : 0.f;
    }
    __syncthreads();
    float s[kTileTc / 8][4], dp[kTileTc / 8][4];
    tile_abt<D>(s, ks, warp * 16, qs);
    tile_abt<D>(dp, vs, warp * 16, gs);
    p_and_ds<false>(a, s, dp, j_lo, i0, lt, rt);
    acc_from_c<D>(av, s, gs);
    acc_from_c<D>(ak, dp, qs);
  }
  store_acc<D>(dk, a.dk.st, j_lo, a.Tk, ak);
  store_acc<D>(dv, a.dv.st, j_lo, a.Tk, av);
}

// ---- launchers ----
TcStrides strides_of(long sb, long sh, long st) { return {sb, sh, st}; }
bool aligned16(const void* p, long sb, long sh, long st) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0 && sb % 8 == 0 && sh % 8 == 0 && st % 8 == 0;
}

TcArgs tc_args(const Attn& a, DType t) {
  a.check();
  if (a.dropout > 0) throw std::invalid_argument("attention: flash_tc has no dropout (use unfused)");
  if (t != DType::bf16) throw Unsupported(std::string("attention: flash_tc runs bf16 storage, not ") + dtype_name(t));
  if (a.D != 64 && a.D != 128)
    throw Unsupported("attention: flash_tc takes head dims 64 and 128, not " + std::to_string(a.D));
  TcArgs f{};
  f.H = a.H, f.Tq = a.Tq, f.Tk = a.Tk, f.causal = a.causal, f.scale = a.sc(), f.scale_log2 = a.sc() * kLog2e;
  return f;
}
template <class V>
TcStrides checked(const V& v, const char* what) {
  if (!aligned16(v.p, v.sb, v.sh, v.st))
    throw Unsupported(std::string("attention: flash_tc needs 16-byte aligned rows (") + what + ")");
  return strides_of(v.sb, v.sh, v.st);
}

// fn(kernel, D) for the instantiated head dims.
template <class F>
void with_head_dim(int D, F&& fn) {
  if (D == 64) fn(std::integral_constant<int, 64>{});
  else fn(std::integral_constant<int, 128>{});
}

template <class K>
void set_smem(K kernel, std::size_t bytes) {
  DLB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}
template <class T>
const bf16* cb(const T& v) {
  return static_cast<const bf16*>(v.p);
}
template <class T>
bf16* mb(const T& v) {
  return static_cast<bf16*>(v.p);
}

template <bool kPipe>
void forward_tc(const Attn& a, AnyView q, AnyView k, AnyView v, AnyMView o, float* lse, DType t, cudaStream_t s) {
  TcArgs f = tc_args(a, t);
  f.q = checked(q, "q"), f.k = checked(k, "k"), f.v = checked(v, "v"), f.o = checked(o, "o");
  const dim3 grid((a.Tq + kRows - 1) / kRows, a.B * a.H);
  with_head_dim(a.D, [&](auto d) {
    constexpr int D = decltype(d)::value;
    const std::size_t smem = (kPipe ? 4 : 2) * Tile<D>::kElems * sizeof(bf16);
    set_smem(flash_tc_fwd_k<D, kPipe>, smem);
    flash_tc_fwd_k<D, kPipe><<<grid, 32 * kWarpsTc, smem, s>>>(f, cb(q), cb(k), cb(v), mb(o), lse);
  });
  check_launch();
}

}  // namespace

void attention_forward_flash_tc(const Attn& a, AnyView q, AnyView k, AnyView v, AnyMView o, float* lse, DType t,
                                cudaStream_t s) {
  forward_tc<false>(a, q, k, v, o, lse, t, s);
}
void attention_forward_flash_tc_pipe(const Attn& a, AnyView q, AnyView k, AnyView v, AnyMView o, float* lse, DType t,
                                     cudaStream_t s) {
  forward_tc<true>(a, q, k, v, o, lse, t, s);
}

void attention_backward_flash_tc(const Attn& a, AnyView q, AnyView k, AnyView v, AnyView o, AnyView dout,
                                 const float* lse, AnyMView dq, AnyMView dk, AnyMView dv, float* scratch, DType t,
                                 cudaStream_t s) {
  TcArgs f = tc_args(a, t);
  f.q = checked(q, "q"), f.k = checked(k, "k"), f.v = checked(v, "v"), f.o = checked(o, "o");
  f.g = checked(dout, "dout"), f.dq = checked(dq, "dq"), f.dk = checked(dk, "dk"), f.dv = checked(dv, "dv");
  flash_tc_rowdot_k<<<dim3((a.Tq + 7) / 8, a.B * a.H), 256, 0, s>>>(f, a.D, cb(o), cb(dout), scratch);
  check_launch();
  const dim3 qgrid((a.Tq + kRows - 1) / kRows, a.B * a.H), kgrid((a.Tk + kRows - 1) / kRows, a.B * a.H);
  with_head_dim(a.D, [&](auto d) {
    constexpr int D = decltype(d)::value;
    const std::size_t smem = 4 * Tile<D>::kElems * sizeof(bf16), smem_kv = smem + 2 * kTileTc * sizeof(float);
    set_smem(flash_tc_dq_k<D>, smem);
    set_smem(flash_tc_dkv_k<D>, smem_kv);
    flash_tc_dq_k<D><<<qgrid, 32 * kWarpsTc, smem, s>>>(f, cb(q), cb(k), cb(v), cb(dout), lse, scratch, mb(dq));
    flash_tc_dkv_k<D><<<kgrid, 32 * kWarpsTc, smem_kv, s>>>(f, cb(q), cb(k), cb(v), cb(dout), lse, scratch, mb(dk),
                                                            mb(dv));
  });
  check_launch();
}

}  // namespace dlb::cuda::seq
