// cuDNN's RNN API (cudnnRNNForward, cudnnRNNBackwardData_v8, cudnnRNNBackwardWeights_v8) for one
// tanh-RNN or LSTM layer, behind the shapes and PyTorch parameter layout of kernels/cpu/seq/rnn.h.
// cuDNN's LSTM matrices (linLayerID 0-3 input, 4-7 recurrent, gates i, f, c~, o) are PyTorch's gate
// row blocks as they stand, and its double-bias mode is PyTorch's b_ih / b_hh: set_weights copies
// each block into cuDNN's weight space (once per weight change, as PyTorch keeps flat weights), and
// backward copies the gradients back out. fp32 data; FMA math by default (allow_tf32 for TF32).
// Data layouts: sequence-major or batch-major unpacked (padded I/O on: cuDNN refuses the unpacked
// layouts without it), every sequence of length T.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>

#include "kernels/cpu/seq/rnn.h"

namespace dlb::cuda::seq {

class CudnnRnn {
 public:
  explicit CudnnRnn(const cpu::seq::RnnShape& s, bool allow_tf32 = false);
  ~CudnnRnn();
  CudnnRnn(const CudnnRnn&) = delete;
  CudnnRnn& operator=(const CudnnRnn&) = delete;

  // PyTorch-layout device weights (biases may be null: zero) into cuDNN's weight space.
  void set_weights(const cpu::seq::RnnWeights& w, cudaStream_t s);
  // h0, c0, hn, cn may be null (zeros / not wanted). train keeps the reserve space for backward.
  void forward(const float* x, const float* h0, const float* c0, float* y, float* hn, float* cn, bool train,
               cudaStream_t s);
  // After a training forward on the same x, h0, c0 and y: dx, dh0, dc0 (may be null) and the
  // parameter gradients in PyTorch's layout (overwritten; null: not wanted). dy, dhn, dcn may be null.
  void backward(const float* x, const float* h0, const float* c0, const float* y, const float* dy, const float* dhn,
                const float* dcn, float* dx, float* dh0, float* dc0, const cpu::seq::RnnGrads& g, cudaStream_t s);

  std::size_t weight_bytes() const;
  std::size_t reserve_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> p_;
};

}  // namespace dlb::cuda::seq
