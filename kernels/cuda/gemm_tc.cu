// Tensor-core GEMMs with mma.sync (see gemm_tc.h), one kernel template, two rows of the table:
//   mma      block tile 128 x 128 x 32, 8 warps as 2 (m) x 4 (n), warp tile 64 x 32
//   mma_256  block tile 128 x 256 x 32, the same 8 warps, warp tile 64 x 64
// Each warp tile is 4 x (WN/8) mma tiles of m16n8k16; three shared-memory stages filled by cp.async
// (16-byte copies, zero-fill outside the matrix) so two tiles are in flight while one is multiplied;
// fragments come from shared memory with ldmatrix (.trans for B, which is stored k-major). Rows are
// padded (A: 40 halves = 80 B, B: BN + 8 halves, 272 or 528 B) so the 8 row addresses of each
// ldmatrix fall in 8 different 16-byte bank groups. Napkin, per k-step of 16 a warp issues 4 A and
// WN/16 B ldmatrix.x4 for 4 * WN/8 mma: 6 per 16 (mma) against 8 per 32 (mma_256). On the H100
// (ncu, 2026-11-27) mma at 4096 ran with the shared-memory pipe at 89% and DRAM at 19%: that ratio is
// the limiter mma_256 halves, at 221 registers a thread (ptxas, sm_90, no spills: one block of 8 warps
// per SM; 81 KB of shared memory). mma_256 has not run on a GPU yet (written 2026-11-27, after the
// session's device time was spent). The block moves (BM + BN) x 32 halves from L2 per BM x BN x 32
// x 2 flop: 64 (mma) and 85 (mma_256) flop per byte.
#include "kernels/cuda/gemm_tc.h"

#include <string>
#include <vector>

#include "kernels/cuda/cuda_util.h"

namespace dlb::cuda {

namespace {

constexpr int kBM = 128, kBK = 32, kStages = 3, kThreads = 256;
constexpr int kApitch = kBK + 8;  // halves per A row in shared memory
constexpr int kAStage = kBM * kApitch;

// The n extent of the block tile and of a warp's tile (4 warps across n).
template <int kBN>
struct Tile {
  static constexpr int kWN = kBN / 4;
  static constexpr int kBpitch = kBN + 8;  // halves per B row in shared memory
  static constexpr int kBStage = kBK * kBpitch;
  static constexpr int kSmemBytes = kStages * (kAStage + kBStage) * 2;
  static constexpr int kBChunks = kBK * kBN / 8;  // 16-byte chunks of a B tile
};

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16-byte async copy; src_bytes 0 fills the destination with zeros (outside the matrix).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

__device__ __forceinline__ void ldmatrix_x4(unsigned r[4], const void* p) {
#if __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
#endif
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned r[4], const void* p) {
#if __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
#endif
}

// d += a b for one m16n8k16 tile; a: 4 regs (8 halves), b: 2 regs, d: 4 fp32.
template <bool kBf16>
__device__ __forceinline__ void mma16816(float d[4], const unsigned a[4], unsigned b0, unsigned b1) {
#if __CUDA_ARCH__ >= 800
  if constexpr (kBf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#endif
}

// Copies K-tile `kt` of A (128 x 32) and B (32 x BN) into stage buffers. kAsync: n, k multiples of
// 8, so every 8-half chunk is either wholly inside or wholly outside the matrix and 16-byte aligned.
template <int kBN, bool kAsync>
__device__ __forceinline__ void load_tile(std::uint16_t* as, std::uint16_t* bs, const std::uint16_t* a,
                                          const std::uint16_t* b, int m, int n, int k, int bm, int bn, int kt) {
  using T = Tile<kBN>;
  const int k0 = kt * kBK;
#pragma unroll
  for (int q = 0; q < kBM * kBK / 8 / kThreads; ++q) {  // A: 128 rows x 4 chunks of 8 halves
    const int idx = threadIdx.x + q * kThreads;
    const int ar = idx / 4, ac = (idx % 4) * 8;
    std::uint16_t* adst = as + ar * kApitch + ac;
    const int gar = bm + ar, gac = k0 + ac;
    if constexpr (kAsync) {
      const bool ain = gar < m && gac < k;
      cp_async16(adst, ain ? a + (size_t)gar * k + gac : a, ain ? 16 : 0);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) adst[e] = (gar < m && gac + e < k) ? a[(size_t)gar * k + gac + e] : std::uint16_t(0);
    }
  }
#pragma unroll
  for (int q = 0; q < T::kBChunks / kThreads; ++q) {  // B: 32 rows x BN/8 chunks of 8 halves
    const int idx = threadIdx.x + q * kThreads;
    const int br = idx / (kBN / 8), bc = (idx % (kBN / 8)) * 8;
    std::uint16_t* bdst = bs + br * T::kBpitch + bc;
    const int gbr = k0 + br, gbc = bn + bc;
    if constexpr (kAsync) {
      const bool bin = gbr < k && gbc < n;
      cp_async16(bdst, bin ? b + (size_t)gbr * n + gbc : b, bin ? 16 : 0);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) bdst[e] = (gbr < k && gbc + e < n) ? b[(size_t)gbr * n + gbc + e] : std::uint16_t(0);
    }
  }
}

template <int kBN, bool kBf16, bool kAsync>
__global__ void __launch_bounds__(kThreads) hgemm_forward_mma_kernel(const std::uint16_t* a, const std::uint16_t* b,
                                                                     float* c, int m, int n, int k) {
  using T = Tile<kBN>;
  constexpr int kNT = T::kWN / 8;  // n8 tiles per warp
  extern __shared__ __align__(16) std::uint16_t smem[];
  std::uint16_t* as = smem;                       // [kStages][kBM][kApitch]
  std::uint16_t* bs = smem + kStages * kAStage;   // [kStages][kBK][kBpitch]
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int wm = (warp / 4) * 64, wn = (warp % 4) * T::kWN;
  const int bm = blockIdx.y * kBM, bn = blockIdx.x * kBN;
  const int tiles = (k + kBK - 1) / kBK;

  float acc[4][kNT][4] = {};  // [m16 tile][n8 tile][fragment]

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < tiles) load_tile<kBN, kAsync>(as + s * kAStage, bs + s * T::kBStage, a, b, m, n, k, bm, bn, s);
    cp_async_commit();
  }
  for (int t = 0; t < tiles; ++t) {
    cp_async_wait<kStages - 2>();  // tile t has landed (this thread's copies) ...
    __syncthreads();               // ... and everyone's; stage (t-1) % kStages is free again
    const int next = t + kStages - 1;
    if (next < tiles)
      load_tile<kBN, kAsync>(as + (next % kStages) * kAStage, bs + (next % kStages) * T::kBStage, a, b, m, n, k, bm,
                             bn, next);
    cp_async_commit();

    const std::uint16_t* at = as + (t % kStages) * kAStage;
    const std::uint16_t* bt = bs + (t % kStages) * T::kBStage;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      // Lane l addresses row (l % 16) and column block (l / 16) * 8 of a 16 x 16 sub-matrix: the
      // four 8 x 8 pieces come back as fragments a0..a3 (A) or b0,b1 of two n8 tiles (B, .trans).
      unsigned fa[4][4], fb[kNT][2];
#pragma unroll
      for (int i = 0; i < 4; ++i) ldmatrix_x4(fa[i], at + (wm + i * 16 + lane % 16) * kApitch + kk + (lane / 16) * 8);
#pragma unroll
      for (int j = 0; j < kNT / 2; ++j) {
        unsigned r[4];
        ldmatrix_x4_trans(r, bt + (kk + lane % 16) * T::kBpitch + wn + j * 16 + (lane / 16) * 8);
        fb[2 * j][0] = r[0], fb[2 * j][1] = r[1], fb[2 * j + 1][0] = r[2], fb[2 * j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < kNT; ++j) mma16816<kBf16>(acc[i][j], fa[i], fb[j][0], fb[j][1]);
    }
  }
  cp_async_wait<0>();

  // Accumulator layout: d0,d1 at row g, cols 2*(l%4)+{0,1}; d2,d3 at row g+8 (g = l/4).
  const int g = lane / 4, c2 = (lane % 4) * 2;
  // With n even and c 8-byte aligned, (row*n + even col) is 8-byte aligned: one float2 store.
  const bool pair = n % 2 == 0 && reinterpret_cast<std::uintptr_t>(c) % 8 == 0;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = bm + wm + i * 16 + g + h * 8, col = bn + wn + j * 8 + c2;
        if (row >= m) continue;
        float* dst = c + (size_t)row * n + col;
        if (pair && col + 1 < n) {
          *reinterpret_cast<float2*>(dst) = make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
        } else {
          if (col < n) dst[0] = acc[i][j][2 * h];
          if (col + 1 < n) dst[1] = acc[i][j][2 * h + 1];
        }
      }
}

template <int kBN, bool kBf16, bool kAsync>
void launch(const std::uint16_t* a, const std::uint16_t* b, float* c, int m, int n, int k, cudaStream_t s) {
  constexpr int smem = Tile<kBN>::kSmemBytes;
  // > 48 KiB of dynamic shared memory needs an opt-in, once per kernel and device.
  static unsigned long long done = 0;
  int dev = 0;
  DLB_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev >= 64 || !(done >> dev & 1ull)) {
    DLB_CUDA_CHECK(cudaFuncSetAttribute(hgemm_forward_mma_kernel<kBN, kBf16, kAsync>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    if (dev < 64) done |= 1ull << dev;
  }
  const dim3 grid((n + kBN - 1) / kBN, (m + kBM - 1) / kBM);
  hgemm_forward_mma_kernel<kBN, kBf16, kAsync><<<grid, kThreads, smem, s>>>(a, b, c, m, n, k);
}

// One row's launcher: the dtype and the cp.async path picked per call.
template <int kBN>
void forward(HalfType t, const std::uint16_t* a, const std::uint16_t* b, float* c, int m, int n, int k,
             cudaStream_t stream) {
  if (m <= 0 || n <= 0 || k <= 0) return;
  // cp.async copies 16 bytes: rows must be multiples of 8 halves and the base pointers 16-byte aligned.
  auto al16 = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  const bool async = n % 8 == 0 && k % 8 == 0 && al16(a) && al16(b);
  if (t == HalfType::bf16) async ? launch<kBN, true, true>(a, b, c, m, n, k, stream) : launch<kBN, true, false>(a, b, c, m, n, k, stream);
  else async ? launch<kBN, false, true>(a, b, c, m, n, k, stream) : launch<kBN, false, false>(a, b, c, m, n, k, stream);
  DLB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

const std::vector<HgemmKernel>& hgemm_kernels() {
  static const std::vector<HgemmKernel> rows = {
      {"mma", "128 x 128 block tile, 64 x 32 warp tiles", forward<128>},
      {"mma_256", "128 x 256 block tile, 64 x 64 warp tiles: half the ldmatrix per mma", forward<256>},
  };
  return rows;
}

const HgemmKernel* find_hgemm_kernel(const std::string& name) {
  for (const HgemmKernel& r : hgemm_kernels())
    if (name == r.name) return &r;
  return nullptr;
}

}  // namespace dlb::cuda
