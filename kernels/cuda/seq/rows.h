// The row kernels of the sequence models on the GPU, twins of kernels/cpu/seq/softmax.h and
// layernorm.h and checked against their references: row softmax (optional causal pattern) forward
// and backward, the fused classifier (softmax + cross-entropy, probabilities written once into
// dlogits), LayerNorm forward and backward. One block per row; every reduction is a fixed tree and
// dw/db sum fixed chunks of rows in order, so results are the same bits on every run. fp32.
// Napkin math: as the CPU twins (softmax 8 / 12 bytes an element, classifier 12 bytes an element,
// LayerNorm 12 / 16 bytes an element): memory-bound.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

namespace dlb::cuda::seq {

void softmax_forward(const float* x, float* y, long rows, int cols, int causal_tq, cudaStream_t s);
void softmax_backward(const float* y, const float* dy, float* dx, long rows, int cols, int causal_tq, cudaStream_t s);

// As cpu::seq::classifier_forward_backward, on the device: losses [rows] (required), dlogits (may be
// null, may alias logits), *loss = the mean over rows with a target >= 0. scratch: one int. Targets
// must be < V (not checked on the device). scale (a device float, may be null): dlogits multiplied
// by *scale (GradScaler's seed gradient; *loss stays unscaled).
void classifier_forward_backward(const float* logits, const int* targets, long rows, int V, int ld, float* losses,
                                 float* dlogits, float* loss, int* scratch, cudaStream_t s,
                                 const float* scale = nullptr);

// As cpu::seq::layernorm_forward / _backward (w, b may be null; mean, rstd [rows] required here).
// Backward needs partial_bytes(rows, C) of device scratch for dw / db.
void layernorm_forward(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd, long rows,
                       int C, float eps, cudaStream_t s);
std::size_t layernorm_backward_scratch_bytes(long rows, int C);
void layernorm_backward(const float* dy, const float* x, const float* w, const float* mean, const float* rstd,
                        float* dx, float* dw, float* db, long rows, int C, void* scratch, cudaStream_t s);

}  // namespace dlb::cuda::seq
