// oneDNN's RNN primitives (vanilla_rnn with tanh, lstm; forward_training and backward) behind the
// same layer interface as ours (kernels/cpu/seq/rnn.h): PyTorch's parameters and layouts in, the
// same outputs and gradients out. PyTorch's gate order i, f, g, o is oneDNN's i, f, c~, o, and its
// [G*H, I] weight matrices are oneDNN's ldgoi layout as they stand; oneDNN has one bias per gate
// row, so b_ih + b_hh is passed (and both bias gradients are its one). The data tensors are plain
// (tnc, or ntc for batch_first); weights go through whatever reorder oneDNN's kernels want, on
// every call, as a layer holding PyTorch's tensors would pay. oneDNN runs on its OpenMP team of
// kernel_threads(). Without oneDNN every call throws dlb::Unsupported (onednn::available()).
#pragma once
#include <vector>

#include "kernels/cpu/seq/rnn.h"

namespace dlb::cpu::onednn {

// What forward keeps for backward: oneDNN's workspace and the states it reads again.
struct RnnSaved {
  std::vector<char> workspace;
  std::vector<float> h0, c0, y, hn, cn;
};

// As seq::rnn_forward; `saved` null: forward_inference (no workspace).
void rnn_forward(const seq::RnnShape& s, const seq::RnnWeights& w, const float* x, const float* h0, const float* c0,
                 float* y, float* hn, float* cn, RnnSaved* saved);
// As seq::rnn_backward (gradients overwritten; dy, dhn, dcn may be null).
void rnn_backward(const seq::RnnShape& s, const seq::RnnWeights& w, const float* x, const float* dy, const float* dhn,
                  const float* dcn, const RnnSaved& saved, float* dx, float* dh0, float* dc0, const seq::RnnGrads& g);

}  // namespace dlb::cpu::onednn
