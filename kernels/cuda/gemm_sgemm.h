// Our own fp32 GEMM kernels, C = A B (row-major; A m x k, B k x n, C m x n; device pointers), as a
// readable progression from the textbook loop to a warp-tiled kernel. Any m, n, k (edges are
// guarded; float4 paths need n and k multiples of 4 and 16-byte aligned pointers, and fall back to
// scalar loads otherwise).
#pragma once
#include <cuda_runtime.h>

#include <string>
#include <vector>

namespace dlb::cuda {

enum class SgemmImpl {
  naive,      // one thread per C element; adjacent threads walk rows (uncoalesced)
  coalesced,  // same, adjacent threads walk columns (coalesced B reads and C writes)
  smem,       // 32 x 32 shared-memory tiles, one element per thread
  regblock,   // 128 x 128 block, 8 x 8 register tile per thread, float4 loads
  warptile,   // 128 x 128 block, 64 x 32 warp tiles, 8 x 8 per thread, double-buffered shared memory;
              // __launch_bounds__(256, 1): no register cap below 255, no spills on sm_80/sm_90
  warptile_lb2,  // the same kernel under __launch_bounds__(256, 2) (<= 128 registers: spills on sm_90)
};

const char* sgemm_impl_name(SgemmImpl impl);
const std::vector<SgemmImpl>& sgemm_impls();
bool parse_sgemm_impl(const std::string& name, SgemmImpl* out);

// Enqueues C = A B on `stream`; throws dlb::cuda errors on a launch failure.
void sgemm_forward(SgemmImpl impl, const float* a, const float* b, float* c, int m, int n, int k,
                   cudaStream_t stream = nullptr);

}  // namespace dlb::cuda
