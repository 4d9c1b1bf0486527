// Training kernels on the GPU, the twins of kernels/cpu/nn_ops.h: elementwise activations, bias,
// max pooling, the fused log-softmax cross-entropy, MSE, SGD and Adam, plus the batch gather used by
// the device-resident input pipeline. Device pointers; work is enqueued on `stream`; no launcher
// synchronizes (they are safe inside CUDA graph capture).
//
// Storage type: the activation/gradient ops take `t`, the dtype their tensors are STORED in: fp32
// (also for tf32, which only changes matmul math), fp16 or bf16 (raw 16-bit tensors, the autocast
// activations of models/amp.h). Whatever the storage, the arithmetic is fp32 and each result is
// rounded once to the storage type, as PyTorch's half kernels do (opmath = float). Parameters,
// optimizer state and losses are always fp32.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/common/verify.h"  // DType

namespace dlb::cuda {

void relu_forward(const void* x, void* y, std::size_t n, DType t, cudaStream_t s);
void relu_backward(const void* y, const void* dy, void* dx, std::size_t n, DType t, cudaStream_t s);
void sigmoid_forward(const void* x, void* y, std::size_t n, DType t, cudaStream_t s);
void sigmoid_backward(const void* y, const void* dy, void* dx, std::size_t n, DType t, cudaStream_t s);

// y[i, j] += b[j] (rows x cols); db[j] = sum_i dy[i, j] (overwrites). b and db have y's type.
void bias_rows_forward(void* y, const void* b, int rows, int cols, DType t, cudaStream_t s);
void bias_rows_backward(const void* dy, void* db, int rows, int cols, DType t, cudaStream_t s);
// y[n, c, :] += b[c]; db[c] = sum over n and the hw plane (overwrites)
void bias_nchw_forward(void* y, const void* b, int n, int c, int hw, DType t, cudaStream_t s);
void bias_nchw_backward(const void* dy, void* db, int n, int c, int hw, DType t, cudaStream_t s);

// k x k window, stride k; arg = flat input index of each output's max. Backward zeroes dx first.
void maxpool2d_forward(const void* x, void* y, std::int32_t* arg, int n, int c, int h, int w, int k, DType t,
                       cudaStream_t s);
void maxpool2d_backward(const void* dy, const std::int32_t* arg, void* dx, std::size_t x_size, std::size_t y_size,
                        DType t, cudaStream_t s);

// Mean cross-entropy over the batch, computed in fp32 whatever the logits' storage `t`:
// dlogits = (softmax - onehot) / n, times *grad_scale when grad_scale is non-null (the loss
// scaler's factor, a device float), rounded to `t`. The batch's (unscaled) loss is ADDED to
// *loss_sum, so an epoch's losses accumulate on the device without a sync per step.
void softmax_xent(const void* logits, const std::int32_t* labels, int n, int classes, void* dlogits, float* loss_sum,
                  DType t, const float* grad_scale, cudaStream_t s);
// Mean squared error against an fp32 target; dpred = 2 (pred - target) / count (* *grad_scale);
// the loss is ADDED to *loss_sum.
void mse(const void* pred, const float* target, std::size_t count, void* dpred, float* loss_sum, DType t,
         const float* grad_scale, cudaStream_t s);

// Optimizers on fp32 master weights. `skip` (device float, may be null): when *skip != 0 the update
// is not applied (GradScaler found an inf/NaN gradient this step), decided on the device so a
// captured CUDA graph stays valid.
// buf = momentum * buf + g; p -= lr * buf (buf starts at zero, so the first step is buf = g).
void sgd_momentum(float* p, const float* g, float* buf, std::size_t n, float lr, float momentum, cudaStream_t s,
                  const float* skip = nullptr);
// *step += 1 unless *skip (the Adam step counter lives on the device).
void increment(int* step, cudaStream_t s, const float* skip = nullptr);
// Adam with the step count read from *step (already incremented), PyTorch's formula.
void adam(float* p, const float* g, float* m, float* v, std::size_t n, float lr, float b1, float b2, float eps,
          const int* step, cudaStream_t s, const float* skip = nullptr);

// x[i] = images[idx[first + i]] (item floats each), y[i] = labels[idx[first + i]].
void gather_batch(const float* images, const std::int32_t* labels, const std::uint32_t* idx, std::size_t first, int n,
                  std::size_t item, float* x, std::int32_t* y, cudaStream_t s);

}  // namespace dlb::cuda
