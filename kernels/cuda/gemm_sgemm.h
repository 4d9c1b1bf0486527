// Our own fp32 GEMM kernels, C = A B (row-major; A m x k, B k x n, C m x n; device pointers), as a
// readable progression from the textbook loop to a warp-tiled kernel. Any m, n, k (edges are
// guarded; float4 paths need n and k multiples of 4 and 16-byte aligned pointers, and fall back to
// scalar loads otherwise).
#pragma once
#include <cuda_runtime.h>

#include <string>
#include <vector>

namespace dlb::cuda {

// One row per kernel, simplest first: the only list of them. The matmul suite adds a case per row and
// the GPU tests iterate the rows, so a new kernel is its __global__ function, a launcher and a row
// in gemm_sgemm.cu's kSgemmKernels, nothing else.
struct SgemmKernel {
  const char* name;  // the suite's `impl` value
  const char* note;  // one line: what it does differently from the row above
  bool slow;         // a few % of peak: the suite runs it only up to 4096^3
  // Enqueues C = A B; `vec` says float4 loads are safe (see sgemm_forward).
  void (*launch)(const float* a, const float* b, float* c, int m, int n, int k, bool vec, cudaStream_t stream);
};

const std::vector<SgemmKernel>& sgemm_kernels();
const SgemmKernel* find_sgemm_kernel(const std::string& name);  // nullptr when no row has that name

// Enqueues C = A B on `stream`; throws dlb::cuda errors on a launch failure.
void sgemm_forward(const SgemmKernel& kernel, const float* a, const float* b, float* c, int m, int n, int k,
                   cudaStream_t stream = nullptr);

}  // namespace dlb::cuda
