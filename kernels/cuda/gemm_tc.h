// Our tensor-core GEMMs for half-precision inputs: C (fp32) = A B with A, B in bf16 or fp16 and fp32
// accumulation, via mma.sync.m16n8k16 (sm_80+). Row-major, A m x k, B k x n, C m x n, device
// pointers (A, B hold 16-bit values). Any m, n, k; the cp.async pipeline needs n, k multiples of 8
// and 16-byte aligned A, B; other shapes and pointers take a plain-load path.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dlb::cuda {

enum class HalfType { fp16, bf16 };

// The table of our tensor-core kernels (the matmul suite's impl values; the tests take every row).
struct HgemmKernel {
  const char* name;  // the suite's `impl` value
  const char* note;  // one line: its tile
  void (*launch)(HalfType t, const std::uint16_t* a, const std::uint16_t* b, float* c, int m, int n, int k,
                 cudaStream_t stream);
};
const std::vector<HgemmKernel>& hgemm_kernels();
const HgemmKernel* find_hgemm_kernel(const std::string& name);  // nullptr when no row has that name

}  // namespace dlb::cuda
