// One recurrent layer on the GPU (tanh RNN, LSTM), the twin of kernels/cpu/seq/rnn.h with the same
// shapes, PyTorch parameters and layouts (cpu::seq::RnnShape / RnnWeights / RnnGrads, here holding
// device pointers): cuBLAS GEMMs -- the input GEMM once for all steps, the recurrent GEMM per step into
// the step's strided rows -- and our fused gate kernel per step; backward through time the same way.
// fp32 storage and cell math; the GEMMs in `gemm`'s compute type (kernels/cuda/cublas_gemm.h
// gemm_f32: fp32 plain FMAs, tf32 / bf16 / fp16 operands rounded on tensor cores, fp32 accumulation).
// cuDNN's RNN API behind the same interface: cudnn_rnn.h.
// Napkin math: as the CPU's; a step at small batch is a few microseconds of launches (GEMM + cell),
// which bounds a T-step layer from below at ~2T launches.
// The fused step (RnnStep::fused, fp32, batch <= kFusedMaxBatch): one kernel a step, the recurrent
// product and the cell together, a warp per gate row (forward: W_hh's row, backward: W_hh^T's) dotted
// with the batch's B state rows, the block's units' cells applied from shared memory: T launches a
// layer and no cuBLAS call per step. Why: on an H100 (2026-11-27) ours' batch-8 step took 3.8x its
// batch-1 step with cuBLAS per step (a cuBLAS call cost ~11-12 us of host time there, a kernel of
// ours ~5-7: graph_cache.h).
// A step reads W_hh once (G H H floats: 256 KB for the default lstm, from L2) and B H state floats
// per gate row from L1: at B <= 16 that is a few microseconds, latency-bound like the GEMM it replaces.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/common/verify.h"
#include "kernels/cpu/seq/rnn.h"

namespace dlb::cuda::seq {

// How each step's recurrent product runs. automatic: fused when the environment says
// DLB_RNN_STEP=fused (opt-in until it has run on a GPU; recorded in the results' env) and the shape
// allows it (fp32 GEMMs, B <= kFusedMaxBatch), else cuBLAS + our cell; `fused` asks for it
// whatever the environment (tests, ablations), still only where the shape allows.
enum class RnnStep { automatic, cublas, fused };
constexpr int kFusedMaxBatch = 16;
RnnStep rnn_step_path(const cpu::seq::RnnShape& s, DType gemm, RnnStep asked = RnnStep::automatic);

// Device floats forward keeps for backward (as cpu::seq::rnn_saved_floats) and backward's scratch.
std::size_t rnn_saved_floats(const cpu::seq::RnnShape& s);
std::size_t rnn_scratch_floats(const cpu::seq::RnnShape& s);

// h0, c0, hn, cn may be null; saved: rnn_saved_floats device floats; scratch: rnn_scratch_floats;
// gemm: the GEMMs' autocast (s.bf16 is the CPU's switch and is not read here); step: rnn_step_path's
// `asked` (forward and backward may take different paths: both read and write the same saved rows).
void rnn_forward(const cpu::seq::RnnShape& s, const cpu::seq::RnnWeights& w, const float* x, const float* h0,
                 const float* c0, float* y, float* hn, float* cn, float* saved, float* scratch, cudaStream_t st,
                 DType gemm = DType::fp32, RnnStep step = RnnStep::automatic);
void rnn_backward(const cpu::seq::RnnShape& s, const cpu::seq::RnnWeights& w, const float* x, const float* dy,
                  const float* dhn, const float* dcn, const float* saved, float* dx, float* dh0, float* dc0,
                  const cpu::seq::RnnGrads& g, float* scratch, cudaStream_t st, DType gemm = DType::fp32,
                  RnnStep step = RnnStep::automatic);

}  // namespace dlb::cuda::seq
