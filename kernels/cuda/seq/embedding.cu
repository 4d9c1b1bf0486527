// Embedding gather and sorted scatter-add on the GPU (see embedding.h).
#include "kernels/cuda/seq/embedding.h"

#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/seq/common.cuh"

namespace dlb::cuda::seq {
namespace {

__global__ void embed_fwd_k(const std::int32_t* tokens, int T, const float* w, int C, const float* pos, float* y,
                            std::size_t total) {
  for (std::size_t e = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; e < total;
       e += std::size_t(blockDim.x) * gridDim.x) {
    const std::size_t i = e / C;
    const int c = int(e % C);
    y[e] = w[std::size_t(tokens[i]) * C + c] + (pos ? pos[(i % T) * C + c] : 0.f);
  }
}

// Block `r` of the sorted order: if it starts a run of equal tokens, sums the run's dy rows (in
// position order, the radix sort being stable) into that token's dw row.
__global__ void embed_bwd_k(const std::int32_t* sorted_tok, const std::int32_t* sorted_pos, int n, const float* dy,
                            int C, float* dw) {
  const int r = blockIdx.x;
  const std::int32_t tok = sorted_tok[r];
  if (r > 0 && sorted_tok[r - 1] == tok) return;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float acc = 0.f;
    for (int k = r; k < n && sorted_tok[k] == tok; ++k) acc += dy[std::size_t(sorted_pos[k]) * C + c];
    dw[std::size_t(tok) * C + c] += acc;
  }
}

// dpos[t, c] += sum over b, b in order.
__global__ void embed_pos_bwd_k(int B, int T, const float* dy, int C, float* dpos) {
  for (std::size_t e = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; e < std::size_t(T) * C;
       e += std::size_t(blockDim.x) * gridDim.x) {
    float acc = 0.f;
    for (int b = 0; b < B; ++b) acc += dy[std::size_t(b) * T * C + e];
    dpos[e] += acc;
  }
}

__global__ void iota_k(std::int32_t* p, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) p[i] = i;
}

// Scratch: sorted tokens, the positions before and after sorting [n] each, then CUB's temporary.
std::size_t cub_bytes(int n) {
  std::size_t bytes = 0;
  DLB_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const std::int32_t*>(nullptr),
                                                 static_cast<std::int32_t*>(nullptr),
                                                 static_cast<const std::int32_t*>(nullptr),
                                                 static_cast<std::int32_t*>(nullptr), n));
  return bytes;
}
std::size_t aligned(std::size_t b) { return (b + 255) / 256 * 256; }

}  // namespace

std::size_t embedding_backward_scratch_bytes(int B, int T) {
  const int n = B * T;
  return 3 * aligned(sizeof(std::int32_t) * n) + cub_bytes(n);
}

void embedding_forward(const std::int32_t* tokens, int B, int T, const float* w, int C, const float* pos, float* y,
                       cudaStream_t s) {
  const std::size_t total = std::size_t(B) * T * C;
  embed_fwd_k<<<grid_for(total), kThreads, 0, s>>>(tokens, T, w, C, pos, y, total);
  check_launch();
}

void embedding_backward(const std::int32_t* tokens, int B, int T, const float* dy, int C, float* dw, float* dpos,
                        void* scratch, cudaStream_t s) {
  const int n = B * T;
  char* p = static_cast<char*>(scratch);
  auto* sorted_tok = reinterpret_cast<std::int32_t*>(p);
  auto* pos_in = reinterpret_cast<std::int32_t*>(p + aligned(sizeof(std::int32_t) * n));
  auto* pos_out = reinterpret_cast<std::int32_t*>(p + 2 * aligned(sizeof(std::int32_t) * n));
  void* tmp = p + 3 * aligned(sizeof(std::int32_t) * n);
  std::size_t tmp_bytes = cub_bytes(n);
  iota_k<<<grid_for(n), kThreads, 0, s>>>(pos_in, n);
  check_launch();
  DLB_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(tmp, tmp_bytes, tokens, sorted_tok, pos_in, pos_out, n, 0,
                                                 int(sizeof(std::int32_t) * 8), s));
  embed_bwd_k<<<n, C < kThreads ? ((C + 31) / 32) * 32 : kThreads, 0, s>>>(sorted_tok, pos_out, n, dy, C, dw);
  check_launch();
  if (dpos) position_embedding_backward(B, T, dy, C, dpos, s);
}

void position_embedding_backward(int B, int T, const float* dy, int C, float* dpos, cudaStream_t s) {
  embed_pos_bwd_k<<<grid_for(std::size_t(T) * C), kThreads, 0, s>>>(B, T, dy, C, dpos);
  check_launch();
}

}  // namespace dlb::cuda::seq
