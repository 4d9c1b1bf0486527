// Layers (see layers.h): the fp64 reference loops first, then each layer's fast fp32 path (im2col +
// OpenBLAS for convolutions, sgemm for Linear, kernels/cpu/nn_ops for the rest) next to its reference.
#include "models/layers.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "kernels/common/errors.h"
#include "kernels/cpu/bf16_cast.h"
#include "kernels/cpu/bf16_gemm.h"
#include "kernels/cpu/conv2d/conv2d.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/nn_ops.h"
#include "kernels/cpu/onednn/onednn.h"

namespace dlb::models {

namespace {
thread_local bool t_bf16 = false;
// x as bf16 bits in this thread's scratch slot `slot` (exact for bf16-valued x).
const std::uint16_t* as_bf16(const float* x, std::size_t n, int slot) {
  thread_local std::vector<std::uint16_t> bufs[3];
  auto& b = bufs[slot];
  if (b.size() < n) b.resize(n);
  cpu::cast_fp32_to_bf16(x, b.data(), n);
  return b.data();
}
// Convolutions take the fp32 arrays as they are: oneDNN converts them to bf16 in its own reorders
// (one pass instead of our cast plus its reorder) and hands bf16-rounded outputs back widened.
constexpr auto kAsBf16 = cpu::onednn::Dt::f32_as_bf16;
}  // namespace

Bf16Compute::Bf16Compute(bool on) : prev_(t_bf16) { t_bf16 = on; }
Bf16Compute::~Bf16Compute() { t_bf16 = prev_; }
bool bf16_compute_native() {
  return cpu::isa_allows(cpu::Isa::avx512_bf16) && cpu::onednn::available() && cpu::onednn::bf16_native();
}
bool bf16_compute_active() { return t_bf16; }

std::string Shape::str() const {
  return std::to_string(n) + "x" + std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w);
}

void Param::resize(std::vector<int> s) {
  shape = std::move(s);
  std::size_t n = 1;
  for (int d : shape) n *= std::size_t(d);
  value.assign(n, 0.f);
  grad.assign(n, 0.f);
  ref_value.assign(n, 0.0);
  ref_grad.assign(n, 0.0);
}

void fill_uniform_bound(float* p, std::size_t n, float bound, std::uint64_t seed) {
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    const double u = double(z >> 11) * (1.0 / 9007199254740992.0);  // [0, 1)
    p[i] = static_cast<float>((2.0 * u - 1.0) * bound);
  }
}

namespace {
void add_into(float* dst, const float* src, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] += src[i];
}
void check_channels(const std::string& layer, const Shape& in, int c) {
  if (in.c != c)
    throw InputError(layer + ": expects " + std::to_string(c) + " input channels, got " + in.str());
}
}  // namespace

// ---- Conv2d ------------------------------------------------------------------------------------------

Conv2d::Conv2d(std::string name, int in_c, int out_c, int k, int stride, int pad)
    : in_c(in_c), out_c(out_c), k(k), stride(stride), pad(pad) {
  weight.name = name + ".weight";
  bias.name = name + ".bias";
  weight.resize({out_c, in_c, k, k});
  bias.resize({out_c});
}

Conv2dShape Conv2d::conv_shape(const Shape& in) const {
  return Conv2dShape::make(in.n, in_c, in.h, in.w, out_c, k, k, pad, stride);
}

Shape Conv2d::out_shape(const Shape& in) const {
  check_channels(weight.name, in, in_c);
  const Conv2dShape s = conv_shape(in);
  if (in.h + 2 * pad < k || in.w + 2 * pad < k)
    throw InputError(weight.name + ": input " + in.str() + " is smaller than the " + std::to_string(k) + "x" +
                     std::to_string(k) + " filter");
  return {in.n, out_c, s.p(), s.q()};
}

void Conv2d::init(std::uint64_t seed) {
  // kaiming_uniform(a=sqrt(5)) reduces to uniform(+-1/sqrt(fan_in)); bias the same bound.
  const float bound = 1.f / std::sqrt(float(in_c * k * k));
  fill_uniform_bound(weight.value.data(), weight.size(), bound, seed);
  fill_uniform_bound(bias.value.data(), bias.size(), bound, seed + 1);
}

void Conv2d::forward(const Shape& in, const float* x, float* y) {
  if (t_bf16) return cpu::onednn::conv2d_forward(conv_shape(in), kAsBf16, x, weight.value.data(), bias.value.data(), y);
  cpu::conv2d_forward_im2col(conv_shape(in), x, weight.value.data(), bias.value.data(), y, ws_);
}

bool Conv2d::forward_bf16_nchw16c(const Shape& in, const float* x, std::uint16_t* y16) {
  return t_bf16 && cpu::onednn::conv2d_forward_bf16_nchw16c(conv_shape(in), x, weight.value.data(), bias.value.data(), y16);
}

bool Conv2d::backward_takes_nchw16c(const Shape& in, bool dx) const {
  // not where backward() runs over a sparse dy (behind a pool): that reads dy dense, in NCHW
  return t_bf16 && !cpu::conv2d_backward_sparse_dy_shape(conv_shape(in), true) &&
         cpu::onednn::conv2d_backward_reads_nchw16c_dy(conv_shape(in), true, dx);
}

bool Conv2d::backward_bf16_nchw16c(const Shape& in, const float* x, const std::uint16_t* dy16, float* dx) {
  if (!t_bf16) return false;
  float* dw = dw_scratch();
  if (!cpu::onednn::conv2d_backward_bf16_nchw16c_dy(conv_shape(in), x, weight.value.data(), dy16, dw,
                                                    dw + weight.size(), dx))
    return false;
  add_dw_scratch();
  return true;
}

void Conv2d::backward(const Shape& in, const float* x, const float*, const float* dy, float* dx) {
  const Conv2dShape s = conv_shape(in);
  float* dw = dw_scratch();
  if (t_bf16) {
    // behind ReLU + MaxPool2d, over dy's nonzeros in bf16 where that kernel runs; else oneDNN's dense bf16
    if (cpu::conv2d_backward_sparse_dy_bf16(s, x, weight.value.data(), dy, dw, dw + weight.size(), dx)) {
      add_dw_scratch();
      return;
    }
    cpu::onednn::conv2d_backward_filter(s, kAsBf16, x, dy, dw, dw + weight.size());
    add_dw_scratch();
    if (dx) cpu::onednn::conv2d_backward_data(s, kAsBf16, dy, weight.value.data(), dx);
    return;
  }
  // behind ReLU + MaxPool2d dy is mostly zeros: both gradients over its nonzeros where that kernel runs
  if (!cpu::conv2d_backward_sparse_dy(s, x, weight.value.data(), dy, dw, dw + weight.size(), dx)) {
    cpu::conv2d_backward_filter_im2col(s, x, dy, dw, dw + weight.size(), ws_);
    if (dx) cpu::conv2d_backward_data_im2col(s, dy, weight.value.data(), dx, ws_);
  }
  add_dw_scratch();
}

bool Conv2d::relu_pool_fusable(const Shape& in, const MaxPool2d& pool) const {
  return !t_bf16 && cpu::conv2d_relu_pool_fusable(conv_shape(in), pool.k);
}

bool Conv2d::forward_relu_pool(const Shape& in, MaxPool2d& pool, const float* x, float* y) {
  if (!relu_pool_fusable(in, pool)) return false;
  cpu::conv2d_forward_relu_pool(conv_shape(in), x, weight.value.data(), bias.value.data(), pool.k, y,
                                pool.argmax_for(out_shape(in)));
  return true;
}

void Conv2d::backward_relu_pool(const Shape& in, const MaxPool2d& pool, const float* x, const float* y,
                                const float* dy) {
  float* dw = dw_scratch();
  cpu::conv2d_backward_filter_relu_pool(conv_shape(in), x, pool.k, dy, y, pool.argmax(), dw, dw + weight.size());
  add_dw_scratch();
}

bool Conv2d::forward_relu_pool_bf16(const Shape& in, MaxPool2d& pool, const float* x, float* y, std::uint16_t* y16) {
  if (!t_bf16 || !cpu::conv2d_relu_pool_bf16_fusable(conv_shape(in), pool.k)) return false;
  return cpu::conv2d_forward_relu_pool_bf16(conv_shape(in), x, weight.value.data(), bias.value.data(), pool.k, y,
                                            pool.argmax_for(out_shape(in)), y16);
}

bool Conv2d::forward_bf16_nchw16c_src(const Shape& in, const std::uint16_t* x16, std::uint16_t* y16) {
  return t_bf16 && cpu::onednn::conv2d_forward_bf16_nchw16c_src(conv_shape(in), x16, weight.value.data(),
                                                                 bias.value.data(), y16);
}

bool Conv2d::reads_nchw16c_src(const Shape& in) const {
  return t_bf16 && cpu::onednn::conv2d_forward_reads_nchw16c_src(conv_shape(in), true);
}

bool Conv2d::backward_relu_pool_bf16(const Shape& in, const MaxPool2d& pool, const float* x, const float* y,
                                     const float* dy) {
  if (!t_bf16) return false;
  float* dw = dw_scratch();
  if (!cpu::conv2d_backward_filter_relu_pool_bf16(conv_shape(in), x, pool.k, dy, y, pool.argmax(), dw,
                                                  dw + weight.size()))
    return false;
  add_dw_scratch();
  return true;
}

float* Conv2d::dw_scratch() {
  dw_tmp_.resize(weight.size() + bias.size());
  return dw_tmp_.data();
}

void Conv2d::add_dw_scratch() {
  add_into(weight.grad.data(), dw_tmp_.data(), weight.size());
  add_into(bias.grad.data(), dw_tmp_.data() + weight.size(), bias.size());
}

void Conv2d::forward_ref(const Shape& in, const double* x, double* y) {
  cpu::conv2d_forward_direct(conv_shape(in), x, weight.ref_value.data(), bias.ref_value.data(), y);
}

void Conv2d::backward_ref(const Shape& in, const double* x, const double*, const double* dy, double* dx) {
  const Conv2dShape s = conv_shape(in);
  cpu::conv2d_backward_filter_direct(s, x, dy, weight.ref_grad.data(), bias.ref_grad.data(), true);
  if (dx) cpu::conv2d_backward_data_direct(s, dy, weight.ref_value.data(), dx);
}

// ---- ConvTranspose2d ------------------------------------------------------------------------------------

ConvTranspose2d::ConvTranspose2d(std::string name, int in_c, int out_c, int k, int stride, int pad, int out_pad)
    : in_c(in_c), out_c(out_c), k(k), stride(stride), pad(pad), out_pad(out_pad) {
  weight.name = name + ".weight";
  bias.name = name + ".bias";
  weight.resize({in_c, out_c, k, k});
  bias.resize({out_c});
}

Shape ConvTranspose2d::out_shape(const Shape& in) const {
  check_channels(weight.name, in, in_c);
  const int ho = (in.h - 1) * stride - 2 * pad + k + out_pad, wo = (in.w - 1) * stride - 2 * pad + k + out_pad;
  if (ho < 1 || wo < 1) throw InputError(weight.name + ": input " + in.str() + " gives an empty output");
  return {in.n, out_c, ho, wo};
}

Conv2dShape ConvTranspose2d::conv_shape(const Shape& in) const {
  const Shape o = out_shape(in);
  return Conv2dShape::make(in.n, out_c, o.h, o.w, in_c, k, k, pad, stride);
}

void ConvTranspose2d::init(std::uint64_t seed) {
  // PyTorch computes fan_in from weight.size(1) * k * k = out_c * k * k for a transposed conv.
  const float bound = 1.f / std::sqrt(float(out_c * k * k));
  fill_uniform_bound(weight.value.data(), weight.size(), bound, seed);
  fill_uniform_bound(bias.value.data(), bias.size(), bound, seed + 1);
}

void ConvTranspose2d::forward(const Shape& in, const float* x, float* y) {
  const Conv2dShape s = conv_shape(in);
  if (t_bf16) cpu::onednn::conv2d_backward_data(s, kAsBf16, x, weight.value.data(), y);
  else cpu::conv2d_backward_data_im2col(s, x, weight.value.data(), y, ws_);
  cpu::bias_nchw_forward(y, bias.value.data(), s.n, out_c, s.h * s.w);
}

void ConvTranspose2d::backward(const Shape& in, const float* x, const float*, const float* dy, float* dx) {
  const Conv2dShape s = conv_shape(in);
  dw_tmp_.resize(weight.size());
  // dW of the equivalent conv: its input is our dy, its output gradient our x.
  if (t_bf16) {
    cpu::onednn::conv2d_backward_filter(s, kAsBf16, dy, x, dw_tmp_.data(), nullptr);
    add_into(weight.grad.data(), dw_tmp_.data(), weight.size());
    cpu::bias_nchw_backward(dy, bias.grad.data(), s.n, out_c, s.h * s.w);
    if (dx) cpu::onednn::conv2d_forward(s, kAsBf16, dy, weight.value.data(), nullptr, dx);
    return;
  }
  cpu::conv2d_backward_filter_im2col(s, dy, x, dw_tmp_.data(), nullptr, ws_);
  add_into(weight.grad.data(), dw_tmp_.data(), weight.size());
  cpu::bias_nchw_backward(dy, bias.grad.data(), s.n, out_c, s.h * s.w);
  if (dx) cpu::conv2d_forward_im2col(s, dy, weight.value.data(), nullptr, dx, ws_);
}

void ConvTranspose2d::forward_ref(const Shape& in, const double* x, double* y) {
  const Conv2dShape s = conv_shape(in);
  cpu::conv2d_backward_data_direct(s, x, weight.ref_value.data(), y);
  const std::size_t hw = std::size_t(s.h) * s.w;
  for (int n = 0; n < s.n; ++n)
    for (int c = 0; c < out_c; ++c)
      for (std::size_t t = 0; t < hw; ++t) y[(std::size_t(n) * out_c + c) * hw + t] += bias.ref_value[c];
}

void ConvTranspose2d::backward_ref(const Shape& in, const double* x, const double*, const double* dy, double* dx) {
  const Conv2dShape s = conv_shape(in);
  cpu::conv2d_backward_filter_direct(s, dy, x, weight.ref_grad.data(), nullptr, true);
  const std::size_t hw = std::size_t(s.h) * s.w;
  for (int n = 0; n < s.n; ++n)
    for (int c = 0; c < out_c; ++c)
      for (std::size_t t = 0; t < hw; ++t) bias.ref_grad[c] += dy[(std::size_t(n) * out_c + c) * hw + t];
  if (dx) cpu::conv2d_forward_direct(s, dy, weight.ref_value.data(), nullptr, dx);
}

// ---- Linear ---------------------------------------------------------------------------------------------

Linear::Linear(std::string name, int in_f, int out_f) : in_f(in_f), out_f(out_f) {
  weight.name = name + ".weight";
  bias.name = name + ".bias";
  weight.resize({out_f, in_f});
  bias.resize({out_f});
}

Shape Linear::out_shape(const Shape& in) const {
  if (int(in.per_item()) != in_f)
    throw InputError(weight.name + ": expects " + std::to_string(in_f) + " input features, got " + in.str());
  return {in.n, out_f, 1, 1};
}

void Linear::init(std::uint64_t seed) {
  const float bound = 1.f / std::sqrt(float(in_f));
  fill_uniform_bound(weight.value.data(), weight.size(), bound, seed);
  fill_uniform_bound(bias.value.data(), bias.size(), bound, seed + 1);
}

void Linear::forward(const Shape& in, const float* x, float* y) {
  // y[n, out] = x[n, in] W[out, in]^T, then + b
  if (t_bf16) {
    cpu::Bf16GemmArgs g;
    g.trans_b = true, g.m = in.n, g.n = out_f, g.k = in_f;
    g.a = as_bf16(x, std::size_t(in.n) * in_f, 0), g.b = as_bf16(weight.value.data(), weight.size(), 1), g.c = y;
    cpu::bf16_gemm(g);
    return cpu::bias_rows_forward(y, bias.value.data(), in.n, out_f);
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, in.n, out_f, in_f, 1.f, x, in_f, weight.value.data(), in_f,
              0.f, y, out_f);
  cpu::bias_rows_forward(y, bias.value.data(), in.n, out_f);
}

void Linear::backward(const Shape& in, const float* x, const float*, const float* dy, float* dx) {
  // dW[out, in] += dy[n, out]^T x[n, in]; db += colsum(dy); dx[n, in] = dy[n, out] W[out, in]
  if (t_bf16) {
    cpu::Bf16GemmArgs g;
    g.trans_a = true, g.m = out_f, g.n = in_f, g.k = in.n, g.beta = 1.f;
    g.a = as_bf16(dy, std::size_t(in.n) * out_f, 0), g.b = as_bf16(x, std::size_t(in.n) * in_f, 1);
    g.c = weight.grad.data();
    cpu::bf16_gemm(g);
    cpu::bias_rows_backward(dy, bias.grad.data(), in.n, out_f);
    if (!dx) return;
    cpu::Bf16GemmArgs d;
    d.m = in.n, d.n = in_f, d.k = out_f;
    d.a = g.a, d.b = as_bf16(weight.value.data(), weight.size(), 2), d.c = dx;
    return cpu::bf16_gemm(d);
  }
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out_f, in_f, in.n, 1.f, dy, out_f, x, in_f, 1.f,
              weight.grad.data(), in_f);
  cpu::bias_rows_backward(dy, bias.grad.data(), in.n, out_f);
  if (dx)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, in.n, in_f, out_f, 1.f, dy, out_f, weight.value.data(),
                in_f, 0.f, dx, in_f);
}

void Linear::forward_ref(const Shape& in, const double* x, double* y) {
  for (int n = 0; n < in.n; ++n)
    for (int o = 0; o < out_f; ++o) {
      double acc = bias.ref_value[o];
      for (int i = 0; i < in_f; ++i) acc += x[std::size_t(n) * in_f + i] * weight.ref_value[std::size_t(o) * in_f + i];
      y[std::size_t(n) * out_f + o] = acc;
    }
}

void Linear::backward_ref(const Shape& in, const double* x, const double*, const double* dy, double* dx) {
  for (int n = 0; n < in.n; ++n)
    for (int o = 0; o < out_f; ++o) {
      const double g = dy[std::size_t(n) * out_f + o];
      bias.ref_grad[o] += g;
      for (int i = 0; i < in_f; ++i) weight.ref_grad[std::size_t(o) * in_f + i] += g * x[std::size_t(n) * in_f + i];
    }
  if (!dx) return;
  for (int n = 0; n < in.n; ++n)
    for (int i = 0; i < in_f; ++i) {
      double acc = 0;
      for (int o = 0; o < out_f; ++o) acc += dy[std::size_t(n) * out_f + o] * weight.ref_value[std::size_t(o) * in_f + i];
      dx[std::size_t(n) * in_f + i] = acc;
    }
}

// ---- ReLU, Sigmoid, Flatten ------------------------------------------------------------------------------

void ReLU::forward(const Shape& in, const float* x, float* y) { cpu::relu_forward(x, y, in.size()); }
void ReLU::backward(const Shape& in, const float*, const float* y, const float* dy, float* dx) {
  if (dx) cpu::relu_backward(y, dy, dx, in.size());
}
void ReLU::forward_ref(const Shape& in, const double* x, double* y) {
  for (std::size_t i = 0; i < in.size(); ++i) y[i] = x[i] > 0 ? x[i] : 0.0;
}
void ReLU::backward_ref(const Shape& in, const double* x, const double*, const double* dy, double* dx) {
  if (dx)
    for (std::size_t i = 0; i < in.size(); ++i) dx[i] = x[i] > 0 ? dy[i] : 0.0;
}

void Sigmoid::forward(const Shape& in, const float* x, float* y) { cpu::sigmoid_forward(x, y, in.size()); }
void Sigmoid::backward(const Shape& in, const float*, const float* y, const float* dy, float* dx) {
  if (dx) cpu::sigmoid_backward(y, dy, dx, in.size());
}
void Sigmoid::forward_ref(const Shape& in, const double* x, double* y) {
  for (std::size_t i = 0; i < in.size(); ++i) y[i] = 1.0 / (1.0 + std::exp(-x[i]));
}
void Sigmoid::backward_ref(const Shape& in, const double*, const double* y, const double* dy, double* dx) {
  if (dx)
    for (std::size_t i = 0; i < in.size(); ++i) dx[i] = dy[i] * y[i] * (1.0 - y[i]);
}

void Flatten::forward(const Shape& in, const float* x, float* y) { std::copy(x, x + in.size(), y); }
void Flatten::backward(const Shape& in, const float*, const float*, const float* dy, float* dx) {
  if (dx) std::copy(dy, dy + in.size(), dx);
}
void Flatten::forward_ref(const Shape& in, const double* x, double* y) { std::copy(x, x + in.size(), y); }
void Flatten::backward_ref(const Shape& in, const double*, const double*, const double* dy, double* dx) {
  if (dx) std::copy(dy, dy + in.size(), dx);
}

// ---- MaxPool2d ----------------------------------------------------------------------------------------------

Shape MaxPool2d::out_shape(const Shape& in) const {
  if (in.h < k || in.w < k) throw InputError("MaxPool2d(" + std::to_string(k) + "): input " + in.str() + " too small");
  return {in.n, in.c, in.h / k, in.w / k};
}

void MaxPool2d::forward(const Shape& in, const float* x, float* y) {
  arg_.resize(out_shape(in).size());
  cpu::maxpool2d_forward(x, y, arg_.data(), in.n, in.c, in.h, in.w, k);
}
void MaxPool2d::backward(const Shape& in, const float*, const float*, const float* dy, float* dx) {
  if (dx) cpu::maxpool2d_backward(dy, arg_.data(), dx, in.size(), out_shape(in).size());
}

void MaxPool2d::forward_relu(const Shape& in, const float* x, float* y) {
  const Shape o = out_shape(in);
  arg_.resize(o.size());
  cpu::maxpool2d_relu_forward(x, y, arg_.data(), in.n, in.c, in.h, in.w, k);
}
void MaxPool2d::forward_relu_nchw16c_bf16(const Shape& in, const std::uint16_t* x16, float* y) {
  if (k != 2 || in.c % 16 != 0) throw std::invalid_argument("forward_relu_nchw16c_bf16: k 2 and channels % 16 only");
  arg_.resize(out_shape(in).size());
  cpu::maxpool2x2_relu_forward_nchw16c_bf16(x16, y, arg_.data(), in.n, in.c, in.h, in.w);
}
void MaxPool2d::backward_relu_nchw16c_bf16(const Shape& in, const float* y, const float* dy, std::uint16_t* dx16) {
  if (k != 2 || in.c % 16 != 0) throw std::invalid_argument("backward_relu_nchw16c_bf16: k 2 and channels % 16 only");
  cpu::maxpool2x2_relu_backward_nchw16c_bf16(dy, y, arg_.data(), dx16, in.n, in.c, in.h, in.w);
}
void MaxPool2d::backward_relu(const Shape& in, const float* y, const float* dy, float* dx) {
  cpu::maxpool2d_relu_backward(dy, y, arg_.data(), dx, in.n, in.c, in.h, in.w, k);
}

void MaxPool2d::forward_ref(const Shape& in, const double* x, double* y) {
  const Shape o = out_shape(in);
  for (long plane = 0; plane < long(in.n) * in.c; ++plane)
    for (int i = 0; i < o.h; ++i)
      for (int j = 0; j < o.w; ++j) {
        double best = x[(plane * in.h + i * k) * in.w + j * k];
        for (int a = 0; a < k; ++a)
          for (int b = 0; b < k; ++b) best = std::max(best, x[(plane * in.h + i * k + a) * in.w + j * k + b]);
        y[(plane * o.h + i) * o.w + j] = best;
      }
}
void MaxPool2d::backward_ref(const Shape& in, const double* x, const double*, const double* dy, double* dx) {
  if (!dx) return;
  const Shape o = out_shape(in);
  std::fill(dx, dx + in.size(), 0.0);
  for (long plane = 0; plane < long(in.n) * in.c; ++plane)
    for (int i = 0; i < o.h; ++i)
      for (int j = 0; j < o.w; ++j) {
        long bi = (plane * in.h + i * k) * in.w + j * k;
        for (int a = 0; a < k; ++a)
          for (int b = 0; b < k; ++b) {
            const long idx = (plane * in.h + i * k + a) * in.w + j * k + b;
            if (x[idx] > x[bi]) bi = idx;
          }
        dx[bi] += dy[(plane * o.h + i) * o.w + j];
      }
}

}  // namespace dlb::models
