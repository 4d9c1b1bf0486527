// nn.ConvTranspose2d(in, out, k, stride, padding, output_padding) with bias. It is the backward-data
// of the Conv2d from `out` to `in` channels, so its weight [in, out, k, k] is that conv's KCRS filter
// and it runs on the same kernels (kernels/cpu/conv2d). Its bf16 variant is a plan step.
#pragma once
#include <string>
#include <vector>

#include "kernels/cpu/conv2d/conv2d.h"
#include "models/layer.h"

namespace dlb::models {

class ConvTranspose2d final : public Layer {
 public:
  ConvTranspose2d(std::string name, int in_c, int out_c, int k, int stride = 1, int pad = 0, int out_pad = 0);
  Op op() const override { return Op::conv_transpose2d; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<ConvTranspose2d>(*this); }
  Shape out_shape(Shapes in) const override;
  std::vector<Param*> params() override { return {&weight, &bias}; }
  void init(std::uint64_t seed) override;
  void forward(const Fwd<float>& a) override;
  void backward(const Bwd<float>& a) override;
  void forward_ref(const Fwd<double>& a) override;
  void backward_ref(const Bwd<double>& a) override;
  double forward_flops(Shapes in) const override { return conv_shape(in[0]).flops(); }
  // The equivalent convolution: input = our output (out_c channels), output = our input (in_c).
  Conv2dShape conv_shape(const Shape& in) const;
  int in_c, out_c, k, stride, pad, out_pad;
  Param weight, bias;  // [in, out, k, k], [out]

 private:
  std::vector<float> ws_, dw_tmp_;
};

}  // namespace dlb::models
