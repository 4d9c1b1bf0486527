// Training kernels on the GPU (fp32), the twins of kernels/cpu/nn_ops.h: elementwise activations,
// bias, max pooling, the fused log-softmax cross-entropy, MSE, SGD and Adam, plus the batch gather
// used by the device-resident input pipeline. Device pointers; work is enqueued on `stream`; no
// launcher synchronizes (they are safe inside CUDA graph capture).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace dlb::cuda {

void relu_forward(const float* x, float* y, std::size_t n, cudaStream_t s);
void relu_backward(const float* y, const float* dy, float* dx, std::size_t n, cudaStream_t s);
void sigmoid_forward(const float* x, float* y, std::size_t n, cudaStream_t s);
void sigmoid_backward(const float* y, const float* dy, float* dx, std::size_t n, cudaStream_t s);

// y[i, j] += b[j] (rows x cols); db[j] = sum_i dy[i, j] (overwrites)
void bias_rows_forward(float* y, const float* b, int rows, int cols, cudaStream_t s);
void bias_rows_backward(const float* dy, float* db, int rows, int cols, cudaStream_t s);
// y[n, c, :] += b[c]; db[c] = sum over n and the hw plane (overwrites)
void bias_nchw_forward(float* y, const float* b, int n, int c, int hw, cudaStream_t s);
void bias_nchw_backward(const float* dy, float* db, int n, int c, int hw, cudaStream_t s);

// k x k window, stride k; arg = flat input index of each output's max. Backward zeroes dx first.
void maxpool2d_forward(const float* x, float* y, std::int32_t* arg, int n, int c, int h, int w, int k, cudaStream_t s);
void maxpool2d_backward(const float* dy, const std::int32_t* arg, float* dx, std::size_t x_size, std::size_t y_size,
                        cudaStream_t s);

// Mean cross-entropy over the batch: dlogits = (softmax - onehot) / n; the batch's loss is ADDED to
// *loss_sum (so an epoch's losses accumulate on the device without a sync per step).
void softmax_xent(const float* logits, const std::int32_t* labels, int n, int classes, float* dlogits,
                  float* loss_sum, cudaStream_t s);
// Mean squared error; dpred = 2 (pred - target) / count; the loss is ADDED to *loss_sum.
void mse(const float* pred, const float* target, std::size_t count, float* dpred, float* loss_sum, cudaStream_t s);

// buf = momentum * buf + g; p -= lr * buf (buf starts at zero, so the first step is buf = g).
void sgd_momentum(float* p, const float* g, float* buf, std::size_t n, float lr, float momentum, cudaStream_t s);
// *step += 1 (the Adam step counter lives on the device, so a captured graph stays valid).
void increment(int* step, cudaStream_t s);
// Adam with the step count read from *step (already incremented), PyTorch's formula.
void adam(float* p, const float* g, float* m, float* v, std::size_t n, float lr, float b1, float b2, float eps,
          const int* step, cudaStream_t s);

// x[i] = images[idx[first + i]] (item floats each), y[i] = labels[idx[first + i]].
void gather_batch(const float* images, const std::int32_t* labels, const std::uint32_t* idx, std::size_t first, int n,
                  std::size_t item, float* x, std::int32_t* y, cudaStream_t s);

}  // namespace dlb::cuda
