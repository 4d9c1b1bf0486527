// The amp suite's GPU kernel cases (bench/amp.cpp registers them): op "gemm", cuBLAS GemmEx with
// half-type or TF32 inputs and fp32 accumulation against fp64; ops "cast" and "unscale", our AMP
// kernels (kernels/cuda/amp_kernels.h) bit-checked against the host references, in GB/s.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "bench/case.h"
#include "kernels/common/verify.h"

namespace dlb::bench {

#ifdef DLB_HAVE_CUDA
std::unique_ptr<Case> make_gemm_amp_gpu(int device, long n, DType t);
// op: "cast" (fp32 -> fp16 / bf16) or "unscale" (the loss scaler's fused unscale + inf/NaN check).
std::unique_ptr<Case> make_amp_kernel_gpu(int device, const std::string& op, DType t, std::size_t n);
#endif

}  // namespace dlb::bench
