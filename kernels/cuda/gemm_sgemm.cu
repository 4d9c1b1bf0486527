// Our fp32 GEMM kernels (see gemm_sgemm.h), simplest first. Row-major: A[i*k+p], B[p*n+j], C[i*n+j].
// Napkin math for one 4096^3 product: 2*4096^3 = 137 GFLOP; A, B, C = 3 x 64 MiB. A kernel that
// re-reads A and B from DRAM for every output (naive) moves 2*4096^3*4 B = 550 GB: memory bound.
// Tiling reuses each loaded element BM (or BN) times from shared memory and registers, which is
// what moves the later kernels from the DRAM roofline to the FMA roofline (H100 SXM ~67 TFLOP/s).
#include "kernels/cuda/gemm_sgemm.h"

#include <cstdint>

#include "kernels/cuda/cuda_util.h"

namespace dlb::cuda {

namespace {

// ---- 1. naive: thread x -> row. Neighbouring threads read A rows k floats apart and write C
// n floats apart: every access is its own memory transaction.
__global__ void sgemm_forward_naive(const float* a, const float* b, float* c, int m, int n, int k) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int j = blockIdx.y * blockDim.y + threadIdx.y;
  if (i >= m || j >= n) return;
  float acc = 0.f;
  for (int p = 0; p < k; ++p) acc += a[(size_t)i * k + p] * b[(size_t)p * n + j];
  c[(size_t)i * n + j] = acc;
}

// ---- 2. coalesced: thread x -> column. A warp reads one A value (broadcast) and 32 consecutive
// B values per step, and writes 32 consecutive C values.
__global__ void sgemm_forward_coalesced(const float* a, const float* b, float* c, int m, int n, int k) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  const int i = blockIdx.y * blockDim.y + threadIdx.y;
  if (i >= m || j >= n) return;
  float acc = 0.f;
  for (int p = 0; p < k; ++p) acc += a[(size_t)i * k + p] * b[(size_t)p * n + j];
  c[(size_t)i * n + j] = acc;
}

// ---- 3. smem: 32 x 32 tiles of A and B staged in shared memory; each element loaded from DRAM is
// used 32 times. Still one output per thread: 2 shared loads per FMA bounds it.
constexpr int kT = 32;
__global__ void sgemm_forward_smem(const float* a, const float* b, float* c, int m, int n, int k) {
  __shared__ float as[kT][kT];
  __shared__ float bs[kT][kT];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int i = blockIdx.y * kT + ty, j = blockIdx.x * kT + tx;
  float acc = 0.f;
  for (int p0 = 0; p0 < k; p0 += kT) {
    as[ty][tx] = (i < m && p0 + tx < k) ? a[(size_t)i * k + p0 + tx] : 0.f;
    bs[ty][tx] = (p0 + ty < k && j < n) ? b[(size_t)(p0 + ty) * n + j] : 0.f;
    __syncthreads();
#pragma unroll
    for (int q = 0; q < kT; ++q) acc += as[ty][q] * bs[q][tx];  // as: broadcast, bs: consecutive banks
    __syncthreads();
  }
  if (i < m && j < n) c[(size_t)i * n + j] = acc;
}

// Tile loaders shared by kernels 4 and 5: four consecutive floats of row `r`, columns c..c+3, of a
// rows x cols row-major matrix, zero outside. kVec: cols % 4 == 0, so an in-range group is one
// aligned float4 load.
template <bool kVec>
__device__ __forceinline__ float4 load4(const float* x, int rows, int cols, int r, int c) {
  if constexpr (kVec) {
    if (r < rows && c < cols) return *reinterpret_cast<const float4*>(x + (size_t)r * cols + c);
    return make_float4(0.f, 0.f, 0.f, 0.f);
  } else {
    float v[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) v[q] = (r < rows && c + q < cols) ? x[(size_t)r * cols + c + q] : 0.f;
    return make_float4(v[0], v[1], v[2], v[3]);
  }
}

template <bool kVec>
__device__ __forceinline__ void store4(float* x, int rows, int cols, int r, int c, float4 v) {
  if (r >= rows) return;
  if (kVec && c + 3 < cols) {
    *reinterpret_cast<float4*>(x + (size_t)r * cols + c) = v;
    return;
  }
  const float w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int q = 0; q < 4; ++q)
    if (c + q < cols) x[(size_t)r * cols + c + q] = w[q];
}

// ---- 4. regblock: a 128 x 128 block of C per 256 threads, each thread an 8 x 8 register tile
// (64 FMAs per 16 shared loads). A is stored transposed in shared memory (as[p][i]) so a thread's 8
// A values are two float4 loads, like its 8 B values.
constexpr int kRbM = 128, kRbN = 128, kRbK = 8, kRbT = 8;
template <bool kVec>
__global__ void __launch_bounds__(256) sgemm_forward_regblock(const float* a, const float* b, float* c, int m, int n,
                                                              int k) {
  __shared__ __align__(16) float as[kRbK][kRbM];
  __shared__ __align__(16) float bs[kRbK][kRbN];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int bm = blockIdx.y * kRbM, bn = blockIdx.x * kRbN;
  // Loader coordinates: A tile 128 x 8 = 256 float4 (row tid/2, cols (tid%2)*4);
  // B tile 8 x 128 = 256 float4 (row tid/32, cols (tid%32)*4).
  const int ar = tid / 2, ac = (tid % 2) * 4, br = tid / 32, bc = (tid % 32) * 4;
  float acc[kRbT][kRbT] = {};
  for (int p0 = 0; p0 < k; p0 += kRbK) {
    const float4 av = load4<kVec>(a, m, k, bm + ar, p0 + ac);
    as[ac + 0][ar] = av.x, as[ac + 1][ar] = av.y, as[ac + 2][ar] = av.z, as[ac + 3][ar] = av.w;
    *reinterpret_cast<float4*>(&bs[br][bc]) = load4<kVec>(b, k, n, p0 + br, bn + bc);
    __syncthreads();
#pragma unroll
    for (int p = 0; p < kRbK; ++p) {
      __align__(16) float ra[kRbT], rb[kRbT];  // read and written as float4: 16-byte aligned
      *reinterpret_cast<float4*>(ra) = *reinterpret_cast<const float4*>(&as[p][ty * kRbT]);
      *reinterpret_cast<float4*>(ra + 4) = *reinterpret_cast<const float4*>(&as[p][ty * kRbT + 4]);
      *reinterpret_cast<float4*>(rb) = *reinterpret_cast<const float4*>(&bs[p][tx * kRbT]);
      *reinterpret_cast<float4*>(rb + 4) = *reinterpret_cast<const float4*>(&bs[p][tx * kRbT + 4]);
#pragma unroll
      for (int y = 0; y < kRbT; ++y)
#pragma unroll
        for (int x = 0; x < kRbT; ++x) acc[y][x] += ra[y] * rb[x];
    }
    __syncthreads();
  }
#pragma unroll
  for (int y = 0; y < kRbT; ++y) {
    const int r = bm + ty * kRbT + y;
#pragma unroll
    for (int x = 0; x < kRbT; x += 4)
      store4<kVec>(c, m, n, r, bn + tx * kRbT + x, make_float4(acc[y][x], acc[y][x + 1], acc[y][x + 2], acc[y][x + 3]));
  }
}

// ---- 5. warptile: the block's 128 x 128 tile is split into warp tiles of 64 rows: 8 warps of
// 64 x 32 (2 x 4 warps, 256 threads) or, kWarpsN = 2, 4 warps of 64 x 64 (128 threads); inside a
// warp, lanes form 8 x 4 and each lane owns a 2 x (kWarpN / 16) grid of 4 x 4 sub-tiles spaced 32
// rows / 16 columns apart, so a warp's shared loads hit consecutive addresses (no bank conflicts;
// A reads are 8 distinct float4 = 128 B, B reads 4 distinct float4). BK = 16, two shared-memory
// stages: the next tile is fetched into registers while this one is computed, and one barrier per
// tile. A's shared rows are padded by 4 floats to soften the transposed stores.
// Per k step a lane does 2 + kWarpN/16 float4 shared loads for 32 * kWarpN/16 FMAs: 4 for 64
// (256 threads) or 6 for 128 (128 threads, 64 x 64 warp tiles: ~1.3x the FMAs per load).
// kMinBlocks is the launch bound's blocks per SM. Measured on the H100 (2026-11-27, n = 4096, of
// cuBLAS fp32): "warptile" (256 threads, bound 1: 167 registers, 1 block/SM) 62.5%, "warptile_lb2"
// (bound 2: <= 128 registers, 2 blocks/SM) 70.7%. "warptile_128t" (128 threads, 64 x 64 warp tiles,
// bound 2) has not run on a GPU yet.
constexpr int kWbM = 128, kWbN = 128, kWbK = 16, kWpad = 4;
constexpr int kWarpM = 64;
template <bool kVec, int kMinBlocks, int kWarpsN>
__global__ void __launch_bounds__(64 * kWarpsN, kMinBlocks) sgemm_forward_warptile(const float* a, const float* b,
                                                                                  float* c, int m, int n, int k) {
  constexpr int kThreads = 64 * kWarpsN, kWarpN = kWbN / kWarpsN, kNSub = kWarpN / 16;
  constexpr int kLoads = kWbM * kWbK / 4 / kThreads;  // float4 per thread per tile, of A and of B
  __shared__ __align__(16) float as[2][kWbK][kWbM + kWpad];
  __shared__ __align__(16) float bs[2][kWbK][kWbN];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = (warp / kWarpsN) * kWarpM, wn = (warp % kWarpsN) * kWarpN;  // warp tile origin in the block
  const int lm = lane / 4, ln = lane % 4;                                    // lane grid 8 x 4
  const int bm = blockIdx.y * kWbM, bn = blockIdx.x * kWbN;
  // Loader: A tile 128 x 16 = 512 float4 (row idx/4, cols (idx%4)*4); B tile 16 x 128 = 512 float4
  // (row idx/32, cols (idx%32)*4); kLoads of each per thread.
  float4 ra[kLoads], rb[kLoads];
  auto fetch = [&](int p0) {
#pragma unroll
    for (int q = 0; q < kLoads; ++q) {
      const int idx = tid + q * kThreads;
      ra[q] = load4<kVec>(a, m, k, bm + idx / 4, p0 + (idx % 4) * 4);
      rb[q] = load4<kVec>(b, k, n, p0 + idx / 32, bn + (idx % 32) * 4);
    }
  };
  auto stash = [&](int s) {
#pragma unroll
    for (int q = 0; q < kLoads; ++q) {
      const int idx = tid + q * kThreads, r = idx / 4, cc = (idx % 4) * 4;
      as[s][cc + 0][r] = ra[q].x, as[s][cc + 1][r] = ra[q].y, as[s][cc + 2][r] = ra[q].z, as[s][cc + 3][r] = ra[q].w;
      *reinterpret_cast<float4*>(&bs[s][idx / 32][(idx % 32) * 4]) = rb[q];
    }
  };
  float acc[2][kNSub][4][4] = {};  // [sub-tile m][sub-tile n][row][col]
  const int tiles = (k + kWbK - 1) / kWbK;
  fetch(0);
  stash(0);
  __syncthreads();
  for (int t = 0; t < tiles; ++t) {
    const int s = t & 1;
    if (t + 1 < tiles) fetch((t + 1) * kWbK);  // global loads in flight during the FMAs below
#pragma unroll
    for (int p = 0; p < kWbK; ++p) {
      __align__(16) float fa[2][4], fb[kNSub][4];  // read and written as float4: 16-byte aligned
#pragma unroll
      for (int i = 0; i < 2; ++i)
        *reinterpret_cast<float4*>(fa[i]) = *reinterpret_cast<const float4*>(&as[s][p][wm + i * 32 + lm * 4]);
#pragma unroll
      for (int j = 0; j < kNSub; ++j)
        *reinterpret_cast<float4*>(fb[j]) = *reinterpret_cast<const float4*>(&bs[s][p][wn + j * 16 + ln * 4]);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < kNSub; ++j)
#pragma unroll
          for (int y = 0; y < 4; ++y)
#pragma unroll
            for (int x = 0; x < 4; ++x) acc[i][j][y][x] += fa[i][y] * fb[j][x];
    }
    // The other stage was last read in iteration t-1, before that iteration's barrier: safe to fill.
    if (t + 1 < tiles) stash(s ^ 1);
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int y = 0; y < 4; ++y) {
      const int r = bm + wm + i * 32 + lm * 4 + y;
#pragma unroll
      for (int j = 0; j < kNSub; ++j)
        store4<kVec>(c, m, n, r, bn + wn + j * 16 + ln * 4,
                     make_float4(acc[i][j][y][0], acc[i][j][y][1], acc[i][j][y][2], acc[i][j][y][3]));
    }
}

unsigned cdiv(int a, int b) { return static_cast<unsigned>((a + b - 1) / b); }

// ---- kernel launchers
void launch_naive(const float* a, const float* b, float* c, int m, int n, int k, bool, cudaStream_t s) {
  sgemm_forward_naive<<<dim3(cdiv(m, 16), cdiv(n, 16)), dim3(16, 16), 0, s>>>(a, b, c, m, n, k);
}
void launch_coalesced(const float* a, const float* b, float* c, int m, int n, int k, bool, cudaStream_t s) {
  sgemm_forward_coalesced<<<dim3(cdiv(n, 32), cdiv(m, 8)), dim3(32, 8), 0, s>>>(a, b, c, m, n, k);
}
void launch_smem(const float* a, const float* b, float* c, int m, int n, int k, bool, cudaStream_t s) {
  sgemm_forward_smem<<<dim3(cdiv(n, kT), cdiv(m, kT)), dim3(kT, kT), 0, s>>>(a, b, c, m, n, k);
}
void launch_regblock(const float* a, const float* b, float* c, int m, int n, int k, bool vec, cudaStream_t s) {
  const dim3 grid(cdiv(n, kRbN), cdiv(m, kRbM));
  if (vec) sgemm_forward_regblock<true><<<grid, 256, 0, s>>>(a, b, c, m, n, k);
  else sgemm_forward_regblock<false><<<grid, 256, 0, s>>>(a, b, c, m, n, k);
}
template <int kMinBlocks, int kWarpsN = 4>
void launch_warptile(const float* a, const float* b, float* c, int m, int n, int k, bool vec, cudaStream_t s) {
  const dim3 grid(cdiv(n, kWbN), cdiv(m, kWbM));
  if (vec) sgemm_forward_warptile<true, kMinBlocks, kWarpsN><<<grid, 64 * kWarpsN, 0, s>>>(a, b, c, m, n, k);
  else sgemm_forward_warptile<false, kMinBlocks, kWarpsN><<<grid, 64 * kWarpsN, 0, s>>>(a, b, c, m, n, k);
}

// ---- kernel version dispatch: the table
const std::vector<SgemmKernel> kSgemmKernels = {
    {"naive", "one thread per C element; adjacent threads walk rows (uncoalesced)", true, launch_naive},
    {"coalesced", "adjacent threads walk columns (coalesced B reads and C writes)", true, launch_coalesced},
    {"smem", "32 x 32 shared-memory tiles, one element per thread", false, launch_smem},
    {"regblock", "128 x 128 block, 8 x 8 register tile per thread, float4 loads", false, launch_regblock},
    {"warptile", "64 x 32 warp tiles, double-buffered smem, __launch_bounds__(256, 1): no spills", false,
     launch_warptile<1>},
    {"warptile_lb2", "warptile under __launch_bounds__(256, 2): <= 128 registers, 2 blocks/SM", false,
     launch_warptile<2>},
    {"warptile_128t", "4 warps of 64 x 64 tiles (128 threads): 1.3x the FMAs per shared load", false,
     launch_warptile<2, 2>},
};

}  // namespace

const std::vector<SgemmKernel>& sgemm_kernels() { return kSgemmKernels; }

const SgemmKernel* find_sgemm_kernel(const std::string& name) {
  for (const SgemmKernel& kernel : kSgemmKernels)
    if (name == kernel.name) return &kernel;
  return nullptr;
}

void sgemm_forward(const SgemmKernel& kernel, const float* a, const float* b, float* c, int m, int n, int k,
                   cudaStream_t stream) {
  if (m <= 0 || n <= 0 || k <= 0) return;
  // float4 rows stay 16-byte aligned only when the leading dimensions are multiples of 4 floats AND
  // the base pointers are 16-byte aligned (a pointer into the middle of a buffer may not be); a
  // misaligned float4 access is a sticky "misaligned address" error that ends the CUDA context.
  auto al16 = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  const bool vec = n % 4 == 0 && k % 4 == 0 && al16(a) && al16(b) && al16(c);
  kernel.launch(a, b, c, m, n, k, vec, stream);
  DLB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace dlb::cuda
