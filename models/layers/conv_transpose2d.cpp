// ConvTranspose2d (see conv_transpose2d.h): fp64 reference first, then the fp32 path.
#include "models/layers/conv_transpose2d.h"

#include <cmath>

#include "kernels/common/errors.h"
#include "kernels/cpu/nn_ops.h"

namespace dlb::models {

ConvTranspose2d::ConvTranspose2d(std::string name, int in_c, int out_c, int k, int stride, int pad, int out_pad)
    : in_c(in_c), out_c(out_c), k(k), stride(stride), pad(pad), out_pad(out_pad) {
  weight.name = name + ".weight";
  bias.name = name + ".bias";
  weight.resize({in_c, out_c, k, k});
  bias.resize({out_c});
}

Shape ConvTranspose2d::out_shape(Shapes ins) const {
  const Shape& in = ins[0];
  if (in.rank() != 4 || in.c() != in_c)
    throw InputError(weight.name + ": expects " + std::to_string(in_c) + " input channels, got " + in.str());
  const int ho = (in.h() - 1) * stride - 2 * pad + k + out_pad, wo = (in.w() - 1) * stride - 2 * pad + k + out_pad;
  if (ho < 1 || wo < 1) throw InputError(weight.name + ": input " + in.str() + " gives an empty output");
  return {in.n(), out_c, ho, wo};
}

Conv2dShape ConvTranspose2d::conv_shape(const Shape& in) const {
  const Shape o = out_shape(in);
  return Conv2dShape::make(in.n(), out_c, o.h(), o.w(), in_c, k, k, pad, stride);
}

void ConvTranspose2d::init(std::uint64_t seed) {
  // PyTorch computes fan_in from weight.size(1) * k * k = out_c * k * k for a transposed conv.
  const float bound = 1.f / std::sqrt(float(out_c * k * k));
  fill_uniform_bound(weight.value.data(), weight.size(), bound, seed);
  fill_uniform_bound(bias.value.data(), bias.size(), bound, seed + 1);
}

void ConvTranspose2d::forward_ref(const Fwd<double>& a) {
  const Conv2dShape s = conv_shape(a.in[0]);
  cpu::conv2d_backward_data_direct(s, a.x(), weight.ref_value.data(), a.y);
  const std::size_t hw = std::size_t(s.h) * s.w;
  for (int n = 0; n < s.n; ++n)
    for (int c = 0; c < out_c; ++c)
      for (std::size_t t = 0; t < hw; ++t) a.y[(std::size_t(n) * out_c + c) * hw + t] += bias.ref_value[c];
}

void ConvTranspose2d::backward_ref(const Bwd<double>& a) {
  const Conv2dShape s = conv_shape(a.in[0]);
  cpu::conv2d_backward_filter_direct(s, a.dy, a.x(), weight.ref_grad.data(), nullptr, true);
  const std::size_t hw = std::size_t(s.h) * s.w;
  for (int n = 0; n < s.n; ++n)
    for (int c = 0; c < out_c; ++c)
      for (std::size_t t = 0; t < hw; ++t) bias.ref_grad[c] += a.dy[(std::size_t(n) * out_c + c) * hw + t];
  if (a.dx()) cpu::conv2d_forward_direct(s, a.dy, weight.ref_value.data(), nullptr, a.dx());
}

void ConvTranspose2d::forward(const Fwd<float>& a) {
  const Conv2dShape s = conv_shape(a.in[0]);
  cpu::conv2d_backward_data_im2col(s, a.x(), weight.value.data(), a.y, ws_);
  cpu::bias_nchw_forward(a.y, bias.value.data(), s.n, out_c, s.h * s.w);
}

void ConvTranspose2d::backward(const Bwd<float>& a) {
  const Conv2dShape s = conv_shape(a.in[0]);
  dw_tmp_.resize(weight.size());
  // dW of the equivalent conv: its input is our dy, its output gradient our x.
  cpu::conv2d_backward_filter_im2col(s, a.dy, a.x(), dw_tmp_.data(), nullptr, ws_);
  add_into(weight.grad.data(), dw_tmp_.data(), weight.size());
  cpu::bias_nchw_backward(a.dy, bias.grad.data(), s.n, out_c, s.h * s.w);
  if (a.dx()) cpu::conv2d_forward_im2col(s, a.dy, weight.value.data(), nullptr, a.dx(), ws_);
}

}  // namespace dlb::models
