// The CPU step kinds (see cpu_steps.h): each kind's body, then the dispatch over StepKind.
#include "models/cpu_steps.h"

#include <stdexcept>

#include "kernels/cpu/bf16_gemm.h"
#include "kernels/cpu/conv2d/conv2d.h"
#include "kernels/cpu/nn_ops.h"
#include "kernels/cpu/onednn/onednn.h"
#include "kernels/cpu/seq/dropout.h"

namespace dlb::models {

namespace {
// bf16 compute on fp32 arrays: oneDNN converts them in the same pass as its layout reorders (one pass
// instead of our cast plus its reorder) and hands bf16-rounded convolution outputs back widened.
constexpr auto kAsBf16 = cpu::onednn::Dt::f32_as_bf16;

// The weight then bias gradient of a conv, sized in the step's scratch, to be added by add_dw.
float* dw_of(Conv2d& c, StepScratch& sc) {
  sc.dw.resize(c.weight.size() + c.bias.size());
  return sc.dw.data();
}
void add_dw(Conv2d& c, const StepScratch& sc) {
  add_into(c.weight.grad.data(), sc.dw.data(), c.weight.size());
  add_into(c.bias.grad.data(), sc.dw.data() + c.weight.size(), c.bias.size());
}
std::int32_t* arg_for(std::size_t pooled, StepScratch& sc) {
  sc.arg.resize(pooled);
  return sc.arg.data();
}
}  // namespace

// ---- fp32 ----

void relu_pool_forward(int k, const Shape& in, const float* x, float* y, StepScratch& sc) {
  std::int32_t* arg = arg_for(std::size_t(in.n()) * in.c() * (in.h() / k) * (in.w() / k), sc);
  cpu::maxpool2d_relu_forward(x, y, arg, in.n(), in.c(), in.h(), in.w(), k);
}

void relu_pool_backward(int k, const Shape& in, const float* y, const float* dy, float* dx, const StepScratch& sc) {
  cpu::maxpool2d_relu_backward(dy, y, sc.arg.data(), dx, in.n(), in.c(), in.h(), in.w(), k);
}

void relu_dropout_forward(const Dropout& d, const Shape& in, const float* x, float* y) {
  if (!d.active()) return cpu::relu_forward(x, y, in.size());
  const DropoutKey k = dropout_key(d.stream, d.step);
  cpu::seq::relu_dropout_forward(x, y, in.size(), d.p, k.seed, k.offset);
}

void relu_dropout_backward(const Dropout& d, const Shape& in, const float* y, const float* dy, float* dx) {
  if (dx) cpu::seq::relu_dropout_backward(y, dy, dx, in.size(), d.active() ? 1.f / (1.f - d.p) : 1.f);
}

void conv_relu_pool_forward(Conv2d& c, int k, const Shape& in, const float* x, float* y, StepScratch& sc) {
  const Conv2dShape s = c.conv_shape(in);
  std::int32_t* arg = arg_for(std::size_t(s.n) * s.k * (s.p() / k) * (s.q() / k), sc);
  cpu::conv2d_forward_relu_pool(s, x, c.weight.value.data(), c.bias.value.data(), k, y, arg);
}

void conv_relu_pool_backward(Conv2d& c, int k, const Shape& in, const float* x, const float* y, const float* dy,
                             StepScratch& sc) {
  float* dw = dw_of(c, sc);
  cpu::conv2d_backward_filter_relu_pool(c.conv_shape(in), x, k, dy, y, sc.arg.data(), dw, dw + c.weight.size());
  add_dw(c, sc);
}

void conv_sparse_dy_backward(Conv2d& c, const Bwd<float>& b, bool bf16, StepScratch& sc) {
  const Conv2dShape s = c.conv_shape(b.in[0]);
  float* dw = dw_of(c, sc);
  const float* w = c.weight.value.data();
  const bool ran = bf16 ? cpu::conv2d_backward_sparse_dy_bf16(s, b.x(), w, b.dy, dw, dw + c.weight.size(), b.dx())
                        : cpu::conv2d_backward_sparse_dy(s, b.x(), w, b.dy, dw, dw + c.weight.size(), b.dx());
  if (ran) return add_dw(c, sc);
  if (bf16) return conv_backward_bf16(c, b.in[0], b.x(), b.dy, b.dx(), sc);
  c.backward(b);
}

// ---- bf16 compute ----

void conv_forward_bf16(Conv2d& c, const Shape& in, const float* x, float* y) {
  cpu::onednn::conv2d_forward(c.conv_shape(in), kAsBf16, x, c.weight.value.data(), c.bias.value.data(), y);
}

void conv_backward_bf16(Conv2d& c, const Shape& in, const float* x, const float* dy, float* dx, StepScratch& sc) {
  const Conv2dShape s = c.conv_shape(in);
  float* dw = dw_of(c, sc);
  cpu::onednn::conv2d_backward_filter(s, kAsBf16, x, dy, dw, dw + c.weight.size());
  add_dw(c, sc);
  if (dx) cpu::onednn::conv2d_backward_data(s, kAsBf16, dy, c.weight.value.data(), dx);
}

void conv_transpose_forward_bf16(ConvTranspose2d& t, const Shape& in, const float* x, float* y) {
  const Conv2dShape s = t.conv_shape(in);
  cpu::onednn::conv2d_backward_data(s, kAsBf16, x, t.weight.value.data(), y);
  cpu::bias_nchw_forward(y, t.bias.value.data(), s.n, t.out_c, s.h * s.w);
}

void conv_transpose_backward_bf16(ConvTranspose2d& t, const Shape& in, const float* x, const float* dy, float* dx,
                                  StepScratch& sc) {
  const Conv2dShape s = t.conv_shape(in);
  sc.dw.resize(t.weight.size());
  // dW of the equivalent conv: its input is our dy, its output gradient our x.
  cpu::onednn::conv2d_backward_filter(s, kAsBf16, dy, x, sc.dw.data(), nullptr);
  add_into(t.weight.grad.data(), sc.dw.data(), t.weight.size());
  cpu::bias_nchw_backward(dy, t.bias.grad.data(), s.n, t.out_c, s.h * s.w);
  if (dx) cpu::onednn::conv2d_forward(s, kAsBf16, dy, t.weight.value.data(), nullptr, dx);
}

void linear_forward_bf16(Linear& l, const Shape& in, const float* x, float* y, StepScratch& sc) {
  // y[m, out] = x[m, in] W[out, in]^T, then + b
  const int m = l.rows(in);
  cpu::dense_bf16_forward(m, l.out_f, l.in_f, x, l.weight.value.data(), y, sc.b16);
  cpu::bias_rows_forward(y, l.bias.value.data(), m, l.out_f);
}

void linear_backward_bf16(Linear& l, const Shape& in, const float* x, const float* dy, float* dx, StepScratch& sc) {
  // dW[out, in] += dy[m, out]^T x[m, in]; db += colsum(dy); dx[m, in] = dy[m, out] W[out, in]
  const int m = l.rows(in);
  cpu::dense_bf16_backward(m, l.out_f, l.in_f, x, l.weight.value.data(), dy, l.weight.grad.data(), dx, sc.b16, true);
  cpu::bias_rows_backward(dy, l.bias.grad.data(), m, l.out_f);
}

void lm_head_forward_bf16(TiedLMHead& h, const Shape& in, const float* x, float* y, StepScratch& sc) {
  const long m = long(in.size() / std::size_t(h.C));  // y[m, V] = x[m, C] wte[:V]^T
  cpu::dense_bf16_forward(m, h.vocab, h.C, x, h.weight().value.data(), y, sc.b16);
}

void lm_head_backward_bf16(TiedLMHead& h, const Shape& in, const float* x, const float* dy, float* dx, StepScratch& sc) {
  const long m = long(in.size() / std::size_t(h.C));  // wte.grad[:V] += dy^T x; dx = dy wte[:V]
  cpu::dense_bf16_backward(m, h.vocab, h.C, x, h.weight().value.data(), dy, h.weight().grad.data(), dx, sc.b16, true);
}

void conv_relu_pool_forward_bf16(Conv2d& c, int k, const Shape& in, const float* x, float* y, std::uint16_t* y16,
                                 StepScratch& sc) {
  const Conv2dShape s = c.conv_shape(in);
  std::int32_t* arg = arg_for(std::size_t(s.n) * s.k * (s.p() / k) * (s.q() / k), sc);
  if (!cpu::conv2d_forward_relu_pool_bf16(s, x, c.weight.value.data(), c.bias.value.data(), k, y, arg, y16))
    throw std::logic_error("conv_relu_pool_bf16: the fused kernel refused a shape the plan gave it");
}

void conv_relu_pool_backward_bf16(Conv2d& c, int k, const Shape& in, const float* x, const float* y, const float* dy,
                                  StepScratch& sc) {
  float* dw = dw_of(c, sc);
  if (!cpu::conv2d_backward_filter_relu_pool_bf16(c.conv_shape(in), x, k, dy, y, sc.arg.data(), dw, dw + c.weight.size()))
    throw std::logic_error("conv_relu_pool_bf16: the fused bf16 first layer's backward did not run");
  add_dw(c, sc);
}

void conv_bf16_relu_pool_forward(Conv2d& c, const Shape& in, const float* x, const std::uint16_t* x16, float* y,
                                 StepScratch& sc) {
  const Conv2dShape s = c.conv_shape(in);
  sc.y16.resize(s.y_size());
  const float *w = c.weight.value.data(), *b = c.bias.value.data();
  const bool ran = x16 ? cpu::onednn::conv2d_forward_bf16_nchw16c_src(s, x16, w, b, sc.y16.data())
                       : cpu::onednn::conv2d_forward_bf16_nchw16c(s, x, w, b, sc.y16.data());
  if (!ran) throw std::logic_error("conv_bf16_relu_pool: oneDNN writes another layout than the plan expected");
  std::int32_t* arg = arg_for(std::size_t(s.n) * s.k * (s.p() / 2) * (s.q() / 2), sc);
  cpu::maxpool2x2_relu_forward_nchw16c_bf16(sc.y16.data(), y, arg, s.n, s.k, s.p(), s.q());
}

void conv_bf16_relu_pool_backward(Conv2d& c, int k, const Shape& in, const float* x, const float* y, const float* dy,
                                  float* dx, PoolConvBackward how, bool sparse_dy, StepScratch& sc) {
  const Conv2dShape s = c.conv_shape(in);
  switch (how) {
    case PoolConvBackward::winners:
      return conv_relu_pool_backward_bf16(c, k, in, x, y, dy, sc);
    case PoolConvBackward::nchw16c_dy: {  // the pool's dx straight into oneDNN's dy layout, bf16
      cpu::maxpool2x2_relu_backward_nchw16c_bf16(dy, y, sc.arg.data(), sc.y16.data(), s.n, s.k, s.p(), s.q());
      float* dw = dw_of(c, sc);
      if (!cpu::onednn::conv2d_backward_bf16_nchw16c_dy(s, x, c.weight.value.data(), sc.y16.data(), dw,
                                                        dw + c.weight.size(), dx))
        throw std::logic_error("conv_bf16_relu_pool: conv backward refused the nChw16c dy it accepted");
      return add_dw(c, sc);
    }
    case PoolConvBackward::dense: {
      sc.dy.resize(s.y_size());
      cpu::maxpool2d_relu_backward(dy, y, sc.arg.data(), sc.dy.data(), s.n, s.k, s.p(), s.q(), k);
      const void* xs[1] = {x};
      float* dxs[1] = {dx};
      if (sparse_dy) return conv_sparse_dy_backward(c, Bwd<float>{in, xs, nullptr, sc.dy.data(), dxs}, true, sc);
      return conv_backward_bf16(c, in, x, sc.dy.data(), dx, sc);
    }
  }
}

// ---- dispatch ----

namespace {
Conv2d& conv_of(const StepArgs& a) { return static_cast<Conv2d&>(*a.layers[0]); }
const Dropout& dropout_of(const StepArgs& a) { return static_cast<const Dropout&>(*a.layers[1]); }
int pool_k(const StepArgs& a, int at) { return static_cast<const MaxPool2d&>(*a.layers[at]).k; }
// recurrent_bf16 / attention_bf16: the layer's own pass with its GEMMs (Recurrent::bf16) or its
// projections (MultiheadAttention::bf16) on bf16 operands, for this call only.
template <class L>
struct Bf16For {
  L& l;
  explicit Bf16For(Layer& layer) : l(static_cast<L&>(layer)) { l.bf16 = true; }
  ~Bf16For() { l.bf16 = false; }
};
// The first layer's fp32 Fwd / Bwd views of a step's arguments.
Fwd<float> fwd(const StepArgs& a) { return {a.in, a.xs, a.y}; }
Bwd<float> bwd(const StepArgs& a) { return {a.in, a.xs, a.y, a.dy, a.dxs}; }
}  // namespace

void step_forward(const Step& s, const StepArgs& a, StepScratch& sc) {
  switch (s.kind) {
    case StepKind::layer:
    case StepKind::conv_sparse_dy:
      return a.layers[0]->forward(fwd(a));
    case StepKind::relu_pool: return relu_pool_forward(pool_k(a, 1), a.in[0], a.x(), a.y, sc);
    case StepKind::relu_dropout: return relu_dropout_forward(dropout_of(a), a.in[0], a.x(), a.y);
    case StepKind::conv_relu_pool: return conv_relu_pool_forward(conv_of(a), pool_k(a, 2), a.in[0], a.x(), a.y, sc);
    case StepKind::conv_bf16:
    case StepKind::conv_sparse_dy_bf16:
      return conv_forward_bf16(conv_of(a), a.in[0], a.x(), a.y);
    case StepKind::conv_transpose_bf16:
      return conv_transpose_forward_bf16(static_cast<ConvTranspose2d&>(*a.layers[0]), a.in[0], a.x(), a.y);
    case StepKind::linear_bf16: return linear_forward_bf16(static_cast<Linear&>(*a.layers[0]), a.in[0], a.x(), a.y, sc);
    case StepKind::lm_head_bf16:
      return lm_head_forward_bf16(static_cast<TiedLMHead&>(*a.layers[0]), a.in[0], a.x(), a.y, sc);
    case StepKind::recurrent_bf16: {
      Bf16For<Recurrent> on(*a.layers[0]);
      return a.layers[0]->forward(fwd(a));
    }
    case StepKind::attention_bf16: {
      Bf16For<MultiheadAttention> on(*a.layers[0]);
      return a.layers[0]->forward(fwd(a));
    }
    case StepKind::conv_relu_pool_bf16:
      return conv_relu_pool_forward_bf16(conv_of(a), pool_k(a, 2), a.in[0], a.x(), a.y, a.y16, sc);
    case StepKind::conv_bf16_relu_pool: return conv_bf16_relu_pool_forward(conv_of(a), a.in[0], a.x(), a.x16, a.y, sc);
  }
}

void step_backward(const Step& s, const StepArgs& a, StepScratch& sc) {
  switch (s.kind) {
    case StepKind::layer: return a.layers[0]->backward(bwd(a));
    case StepKind::relu_pool: return relu_pool_backward(pool_k(a, 1), a.in[0], a.y, a.dy, a.dx(), sc);
    case StepKind::relu_dropout: return relu_dropout_backward(dropout_of(a), a.in[0], a.y, a.dy, a.dx());
    case StepKind::conv_relu_pool:
      return conv_relu_pool_backward(conv_of(a), pool_k(a, 2), a.in[0], a.x(), a.y, a.dy, sc);
    case StepKind::conv_sparse_dy: return conv_sparse_dy_backward(conv_of(a), bwd(a), false, sc);
    case StepKind::conv_sparse_dy_bf16: return conv_sparse_dy_backward(conv_of(a), bwd(a), true, sc);
    case StepKind::conv_bf16: return conv_backward_bf16(conv_of(a), a.in[0], a.x(), a.dy, a.dx(), sc);
    case StepKind::conv_transpose_bf16:
      return conv_transpose_backward_bf16(static_cast<ConvTranspose2d&>(*a.layers[0]), a.in[0], a.x(), a.dy, a.dx(), sc);
    case StepKind::linear_bf16:
      return linear_backward_bf16(static_cast<Linear&>(*a.layers[0]), a.in[0], a.x(), a.dy, a.dx(), sc);
    case StepKind::lm_head_bf16:
      return lm_head_backward_bf16(static_cast<TiedLMHead&>(*a.layers[0]), a.in[0], a.x(), a.dy, a.dx(), sc);
    case StepKind::recurrent_bf16: {
      Bf16For<Recurrent> on(*a.layers[0]);
      return a.layers[0]->backward(bwd(a));
    }
    case StepKind::attention_bf16: {
      Bf16For<MultiheadAttention> on(*a.layers[0]);
      return a.layers[0]->backward(bwd(a));
    }
    case StepKind::conv_relu_pool_bf16:
      return conv_relu_pool_backward_bf16(conv_of(a), pool_k(a, 2), a.in[0], a.x(), a.y, a.dy, sc);
    case StepKind::conv_bf16_relu_pool:
      return conv_bf16_relu_pool_backward(conv_of(a), pool_k(a, 2), a.in[0], a.x(), a.y, a.dy, a.dx(), s.pool_bwd,
                                          s.sparse_dy, sc);
  }
}

}  // namespace dlb::models
