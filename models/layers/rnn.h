// nn.RNN (tanh) and nn.LSTM: `layers` stacked recurrent layers, one direction, PyTorch's parameters
// (weight_ih_l{k} [G*H, in], weight_hh_l{k} [G*H, H], bias_ih_l{k}, bias_hh_l{k}; LSTM gates i, f, g,
// o) and init (uniform +-1/sqrt(H)). Input x [n, T, I] -> y [n, T, H], the last layer's outputs.
// Memory order: batch_first keeps [n, T, .] as the Shape says; sequence-first (PyTorch's default)
// stores x and y time-major, [T, n, .], while the Shape is still written [n, T, .] (the batch
// first, as every Shape in dlbench): the layers around it that read by position (Embedding,
// Linear, Dropout) do not care, the ones that do (SelectStep) take the same flag.
// With `state` the layer takes h0 (and for LSTM c0) as more inputs, [n, layers, H] each (PyTorch's
// [layers, n, H] with the batch first); without, they are zeros. hn/cn are not outputs: a model
// reading the last hidden state of the last layer reads y's last step (SelectStep).
// impl: ours (kernels/cpu/seq/rnn.h: one input GEMM per layer, a GEMM + fused cell per step) or
// onednn (kernels/cpu/onednn/rnn.h: oneDNN's vanilla_rnn / lstm primitives) on the CPU; cudnn
// (kernels/cuda/seq/cudnn_rnn.h) on the GPU only: the CUDA sequence trainer reads `impl`, the CPU
// step refuses it (Unsupported).
#pragma once
#include <string>
#include <vector>

#include "kernels/cpu/onednn/rnn.h"
#include "kernels/cpu/seq/rnn.h"
#include "models/layer.h"

namespace dlb::models {

enum class RnnImpl { ours, onednn, cudnn };
RnnImpl parse_rnn_impl(const std::string& s);  // ours, onednn, cudnn; UsageError for another name
const char* rnn_impl_name(RnnImpl i);

class Recurrent final : public Layer {
 public:
  Recurrent(std::string name, cpu::seq::RnnCell cell, int input, int hidden, int layers = 1, bool batch_first = false,
            bool state = false);
  Op op() const override { return cell == cpu::seq::RnnCell::lstm ? Op::lstm : Op::rnn_tanh; }
  int inputs() const override { return state ? (cell == cpu::seq::RnnCell::lstm ? 3 : 2) : 1; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<Recurrent>(*this); }
  Shape out_shape(Shapes in) const override;
  std::vector<Param*> params() override;
  void init(std::uint64_t seed) override;
  void forward(const Fwd<float>& a) override;
  void backward(const Bwd<float>& a) override;
  void forward_ref(const Fwd<double>& a) override;
  void backward_ref(const Bwd<double>& a) override;
  double forward_flops(Shapes in) const override;
  // Eval mode (Model::set_step): the CUDA twin's cuDNN forward then keeps no reserve space and
  // refills its weight space only when the optimizer's step count changed.
  void set_step(bool training_, std::uint64_t step_) override { training = training_, step = step_; }
  // Layer k's kernel shape for a batch of n over T steps.
  cpu::seq::RnnShape shape(int k, int n, int T) const;
  // Layer k's parameters (fp32) as the kernels take them.
  cpu::seq::RnnWeights weights(int k) const;

  cpu::seq::RnnCell cell;
  int input, hidden, layers;
  bool batch_first, state;
  RnnImpl impl = RnnImpl::ours;
  bool training = true;
  std::uint64_t step = 0;  // the optimizer's step count (Model::set_step)
  bool bf16 = false;  // ours: the GEMMs in bf16 (RnnShape::bf16), raised by the plan's recurrent_bf16 step for its call
  std::vector<Param> p;  // 4 per layer: weight_ih, weight_hh, bias_ih, bias_hh

 private:
  // Scratch kept from forward to backward: per layer its saved states (ours or oneDNN's) and the
  // outputs of the layers below the last.
  std::vector<std::vector<float>> saved_;
  std::vector<cpu::onednn::RnnSaved> saved_dnn_;
  std::vector<std::vector<float>> ys_;
  std::vector<float> dbuf_[2];  // the gradients between layers, in turns
  std::vector<float> h0_, c0_, dh_, dc_, g_;
};

}  // namespace dlb::models
