// nn.Conv2d(in, out, k, stride, padding) with bias: im2col + GEMM (kernels/cpu/conv2d, its dispatch
// table picks the algorithm) and the fp64 direct reference. Its fused, sparse-dy and bf16 variants
// are plan steps (models/cpu_steps.h).
#pragma once
#include <string>
#include <vector>

#include "kernels/cpu/conv2d/conv2d.h"
#include "models/layer.h"

namespace dlb::models {

class Conv2d final : public Layer {
 public:
  Conv2d(std::string name, int in_c, int out_c, int k, int stride = 1, int pad = 0);
  Op op() const override { return Op::conv2d; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<Conv2d>(*this); }
  Shape out_shape(Shapes in) const override;
  std::vector<Param*> params() override { return {&weight, &bias}; }
  void init(std::uint64_t seed) override;
  void forward(const Fwd<float>& a) override;
  void backward(const Bwd<float>& a) override;  // dense (im2col GEMMs)
  void forward_ref(const Fwd<double>& a) override;
  void backward_ref(const Bwd<double>& a) override;
  double forward_flops(Shapes in) const override { return conv_shape(in[0]).flops(); }
  Conv2dShape conv_shape(const Shape& in) const;
  int in_c, out_c, k, stride, pad;
  Param weight, bias;  // [out, in, k, k], [out]

 private:
  std::vector<float> ws_, dw_tmp_;  // im2col workspace; dW then db of one backward, added into .grad
};

}  // namespace dlb::models
