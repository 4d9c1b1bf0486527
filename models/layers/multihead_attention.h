// nn.MultiheadAttention(E, heads, dropout) as nn.Transformer's layers call it (need_weights=False,
// no key padding mask): PyTorch's packed in_proj_weight [3E, E] (rows: q, k, v) and in_proj_bias
// [3E], out_proj.weight [E, E] and out_proj.bias; init as PyTorch's (xavier_uniform in_proj, the
// Linear default out_proj, zero biases). Self-attention reads one input x [n, T, E]; cross-attention
// (`cross`) reads the query x [n, Tq, E] and a memory [n, Tk, E] projected to K and V. `causal`: query
// i sees keys j <= i (the decoder's tgt_mask = generate_square_subsequent_mask, torch's is_causal).
// Attention dropout acts on the probabilities in training (PyTorch's dropout_p), keyed by the layer's
// stream and step as Dropout is (dropout.h).
// With `projections` false the layer is the attention core alone (GPT-2's c_attn / c_proj are Linear
// layers around it): input a packed [n, T, 3E] QKV, output the heads' [n, T, E], no parameters.
// The core: kernels/cpu/seq/attention.h, algorithm `algo` (unfused, flash; auto: flash where no
// dropout is drawn and the mask is causal, else unfused; dropout needs unfused).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/bf16_gemm.h"
#include "kernels/cpu/seq/attention.h"
#include "models/layer.h"

namespace dlb::models {

class MultiheadAttention final : public Layer {
 public:
  struct Options {
    bool cross = false, causal = false, projections = true;
    bool xavier_out = false;  // out_proj.weight xavier_uniform too (nn.Transformer's _reset_parameters)
    float dropout = 0.f;
    std::uint64_t stream = 0;  // the dropout's Philox stream
  };
  MultiheadAttention(std::string name, int E, int heads, Options o);
  Op op() const override { return Op::multihead_attention; }
  int inputs() const override { return o.cross ? 2 : 1; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<MultiheadAttention>(*this); }
  Shape out_shape(Shapes in) const override;
  std::vector<Param*> params() override;
  void init(std::uint64_t seed) override;
  void set_step(bool training_, std::uint64_t step_) override { training = training_, step = step_; }
  void forward(const Fwd<float>& a) override;
  void backward(const Bwd<float>& a) override;
  void forward_ref(const Fwd<double>& a) override;
  void backward_ref(const Bwd<double>& a) override;
  double forward_flops(Shapes in) const override;
  // The core's problem for a batch (dropout, seed and offset as this step draws them).
  cpu::seq::Attn attn(Shapes in) const;
  // The algorithm that runs for it.
  const cpu::seq::AttnAlgo& algorithm(const cpu::seq::Attn& a) const;

  int E, heads;
  Options o;
  std::string algo = "auto";
  bool training = true;
  std::uint64_t step = 0;
  Param in_w, in_b, out_w, out_b;
  // bf16 autocast on a CPU that computes bf16 (the plan's attention_bf16 step, for that call only):
  // the projections' GEMMs on bf16 operands (kernels/cpu/bf16_gemm.h, fp32 sums and outputs), the
  // core (softmax, its two products) in fp32, as a recurrent layer keeps its cell math fp32.
  bool bf16 = false;

 private:
  cpu::Bf16Scratch* s16() { return bf16 ? &b16_ : nullptr; }
  std::vector<float> qkv_, kv_, ctx_, dctx_, dqkv_, dkv_;
  cpu::Bf16Scratch b16_;  // bf16 operands of the projections (bf16 only)
  cpu::seq::AttnSaved saved_;
};

}  // namespace dlb::models
