// One recurrent layer on the GPU (tanh RNN, LSTM), the twin of kernels/cpu/seq/rnn.h with the same
// shapes, PyTorch parameters and layouts (cpu::seq::RnnShape / RnnWeights / RnnGrads, here holding
// device pointers): cuBLAS GEMMs -- the input GEMM once for all steps, the recurrent GEMM per step into
// the step's strided rows -- and our fused gate kernel per step; backward through time the same way.
// fp32 storage and cell math; the GEMMs in `gemm`'s compute type (kernels/cuda/cublas_gemm.h
// gemm_f32: fp32 plain FMAs, tf32 / bf16 / fp16 operands rounded on tensor cores, fp32 accumulation).
// cuDNN's RNN API behind the same interface: cudnn_rnn.h.
// Napkin math: as the CPU's; a step at small batch is a few microseconds of launches (GEMM + cell),
// which bounds a T-step layer from below at ~2T launches.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/common/verify.h"
#include "kernels/cpu/seq/rnn.h"

namespace dlb::cuda::seq {

// Device floats forward keeps for backward (as cpu::seq::rnn_saved_floats) and backward's scratch.
std::size_t rnn_saved_floats(const cpu::seq::RnnShape& s);
std::size_t rnn_scratch_floats(const cpu::seq::RnnShape& s);

// h0, c0, hn, cn may be null; saved: rnn_saved_floats device floats; scratch: rnn_scratch_floats;
// gemm: the GEMMs' autocast (s.bf16 is the CPU's switch and is not read here).
void rnn_forward(const cpu::seq::RnnShape& s, const cpu::seq::RnnWeights& w, const float* x, const float* h0,
                 const float* c0, float* y, float* hn, float* cn, float* saved, float* scratch, cudaStream_t st,
                 DType gemm = DType::fp32);
void rnn_backward(const cpu::seq::RnnShape& s, const cpu::seq::RnnWeights& w, const float* x, const float* dy,
                  const float* dhn, const float* dcn, const float* saved, float* dx, float* dh0, float* dc0,
                  const cpu::seq::RnnGrads& g, float* scratch, cudaStream_t st, DType gemm = DType::fp32);

}  // namespace dlb::cuda::seq
