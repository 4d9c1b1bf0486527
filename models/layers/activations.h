// Elementwise activations: nn.ReLU and nn.Sigmoid (kernels/cpu/nn_ops), nn.GELU(approximate='tanh')
// (kernels/cpu/seq/gelu.h, GPT-2's MLP), with their fp64 references.
#pragma once
#include "models/layer.h"

namespace dlb::models {

class ReLU final : public Layer {
 public:
  Op op() const override { return Op::relu; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<ReLU>(*this); }
  Shape out_shape(Shapes in) const override { return in[0]; }
  void forward(const Fwd<float>& a) override;
  void backward(const Bwd<float>& a) override;
  void forward_ref(const Fwd<double>& a) override;
  void backward_ref(const Bwd<double>& a) override;
};

class Sigmoid final : public Layer {
 public:
  Op op() const override { return Op::sigmoid; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<Sigmoid>(*this); }
  Shape out_shape(Shapes in) const override { return in[0]; }
  void forward(const Fwd<float>& a) override;
  void backward(const Bwd<float>& a) override;
  void forward_ref(const Fwd<double>& a) override;
  void backward_ref(const Bwd<double>& a) override;
};

class GELU final : public Layer {
 public:
  Op op() const override { return Op::gelu; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<GELU>(*this); }
  Shape out_shape(Shapes in) const override { return in[0]; }
  void forward(const Fwd<float>& a) override;
  void backward(const Bwd<float>& a) override;
  void forward_ref(const Fwd<double>& a) override;
  void backward_ref(const Bwd<double>& a) override;
};

}  // namespace dlb::models
