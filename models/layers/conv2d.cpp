// Conv2d (see conv2d.h): fp64 reference first, then the fp32 path.
#include "models/layers/conv2d.h"

#include <cmath>

#include "kernels/common/errors.h"

namespace dlb::models {

Conv2d::Conv2d(std::string name, int in_c, int out_c, int k, int stride, int pad)
    : in_c(in_c), out_c(out_c), k(k), stride(stride), pad(pad) {
  weight.name = name + ".weight";
  bias.name = name + ".bias";
  weight.resize({out_c, in_c, k, k});
  bias.resize({out_c});
}

Conv2dShape Conv2d::conv_shape(const Shape& in) const {
  return Conv2dShape::make(in.n(), in_c, in.h(), in.w(), out_c, k, k, pad, stride);
}

Shape Conv2d::out_shape(Shapes ins) const {
  const Shape& in = ins[0];
  if (in.rank() != 4 || in.c() != in_c)
    throw InputError(weight.name + ": expects " + std::to_string(in_c) + " input channels, got " + in.str());
  if (in.h() + 2 * pad < k || in.w() + 2 * pad < k)
    throw InputError(weight.name + ": input " + in.str() + " is smaller than the " + std::to_string(k) + "x" +
                     std::to_string(k) + " filter");
  const Conv2dShape s = conv_shape(in);
  return {in.n(), out_c, s.p(), s.q()};
}

void Conv2d::init(std::uint64_t seed) {
  // kaiming_uniform(a=sqrt(5)) reduces to uniform(+-1/sqrt(fan_in)); bias the same bound.
  const float bound = 1.f / std::sqrt(float(in_c * k * k));
  fill_uniform_bound(weight.value.data(), weight.size(), bound, seed);
  fill_uniform_bound(bias.value.data(), bias.size(), bound, seed + 1);
}

void Conv2d::forward_ref(const Fwd<double>& a) {
  cpu::conv2d_forward_direct(conv_shape(a.in[0]), a.x(), weight.ref_value.data(), bias.ref_value.data(), a.y);
}

void Conv2d::backward_ref(const Bwd<double>& a) {
  const Conv2dShape s = conv_shape(a.in[0]);
  cpu::conv2d_backward_filter_direct(s, a.x(), a.dy, weight.ref_grad.data(), bias.ref_grad.data(), true);
  if (a.dx()) cpu::conv2d_backward_data_direct(s, a.dy, weight.ref_value.data(), a.dx());
}

void Conv2d::forward(const Fwd<float>& a) {
  cpu::conv2d_forward_im2col(conv_shape(a.in[0]), a.x(), weight.value.data(), bias.value.data(), a.y, ws_);
}

void Conv2d::backward(const Bwd<float>& a) {
  const Conv2dShape s = conv_shape(a.in[0]);
  dw_tmp_.resize(weight.size() + bias.size());
  float* dw = dw_tmp_.data();
  cpu::conv2d_backward_filter_im2col(s, a.x(), a.dy, dw, dw + weight.size(), ws_);
  if (a.dx()) cpu::conv2d_backward_data_im2col(s, a.dy, weight.value.data(), a.dx(), ws_);
  add_into(weight.grad.data(), dw, weight.size());
  add_into(bias.grad.data(), dw + weight.size(), bias.size());
}

}  // namespace dlb::models
