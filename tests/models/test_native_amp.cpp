// Real bf16 compute in the CPU AMP step (the bf16 step kinds of models/plan.h, models/cpu_steps.h): on
// bf16-exact operands Conv2d, ConvTranspose2d and Linear in bf16 (oneDNN, vdpbf16ps, fp32
// accumulation) give what the fp32 path gives to within fp32 accumulation-order noise (convolution
// outputs also rounded to bf16), and a net128 AmpTrainer step computing in bf16 tracks the emulated
// one (DLB_CPU_ISA-style cap below avx512_bf16) over several steps.
// Skips where the CPU, the cap or the build offers no native bf16, saying which.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/common/verify.h"
#include "kernels/cpu/bf16_cast.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/onednn/onednn.h"
#include "models/amp.h"
#include "models/cpu_steps.h"
#include "models/half.h"
#include "models/net.h"

using namespace dlb;
using namespace dlb::models;

namespace {
#define SKIP_UNLESS_NATIVE()                                                                                    \
  if (!bf16_compute_native())                                                                                   \
  GTEST_SKIP() << "no native bf16 here: ISA cap " << cpu::isa_name(cpu::isa_cap()) << ", oneDNN "             \
               << (cpu::onednn::available() ? cpu::onednn::isa() : cpu::onednn::unavailable_reason())

void round_bf16(std::vector<float>& v) { cpu::round_through_bf16(v.data(), v.size()); }
bool bf16_exact(const std::vector<float>& v) {
  for (float f : v)
    if (cpu::bf16_to_fp32_ref(cpu::fp32_to_bf16_ref(f)) != f) return false;
  return true;
}
// Convolutions under bf16 compute hand back y and dx rounded to bf16 (oneDNN's bf16 outputs,
// onednn.h Dt::f32_as_bf16): within half a bf16 ulp of the largest value, plus accumulation-order
// noise that can move a value across a rounding boundary: 2^-8 of the scale.
constexpr double kRoundedTol = 1.0 / 256;

// y, dx and every parameter gradient of `l` on input x (n images of `in`) run as a step of kind `k`
// (StepKind::layer: the layer's own fp32 path; the bf16 kinds: bf16 compute).
struct Out {
  std::vector<float> y, dx, grads;
};
Out run_step(Layer& l, StepKind k, const Shape& in, const std::vector<float>& x, const std::vector<float>& dy) {
  Out o;
  o.y.assign(l.out_shape(in).size(), 0.f), o.dx.assign(in.size(), 0.f);
  for (Param* p : l.params()) std::fill(p->grad.begin(), p->grad.end(), 0.f);
  Step s;
  s.kind = k;
  Layer* ls[1] = {&l};
  const void* xs[1] = {x.data()};
  float* dxs[1] = {o.dx.data()};
  StepScratch sc;
  step_forward(s, StepArgs{ls, in, xs, o.y.data()}, sc);
  step_backward(s, StepArgs{ls, in, xs, o.y.data(), dy.data(), dxs}, sc);
  for (Param* p : l.params()) o.grads.insert(o.grads.end(), p->grad.begin(), p->grad.end());
  return o;
}
StepKind bf16_kind(Op op) {
  switch (op) {
    case Op::conv2d: return StepKind::conv_bf16;
    case Op::conv_transpose2d: return StepKind::conv_transpose_bf16;
    case Op::lm_head: return StepKind::lm_head_bf16;
    default: return StepKind::linear_bf16;
  }
}

// Layer l (input shape `in`) on bf16 operands from `seed`, its bf16 step against its fp32 path: y and
// dx within out_tol, dW and db within 1e-4; and outputs the step kind says are rounded are bf16-exact
// (the AMP step skips its own rounding of them).
void expect_native_matches(Layer& l, const Shape& in, std::uint64_t seed, double out_tol) {
  std::vector<float> x(in.size()), dy(l.out_shape(in).size());
  fill_uniform(x.data(), x.size(), seed), fill_uniform(dy.data(), dy.size(), seed + 1);
  round_bf16(x), round_bf16(dy);
  const StepKind k = bf16_kind(l.op());
  const Out f = run_step(l, StepKind::layer, in, x, dy), h = run_step(l, k, in, x, dy);
  const char* name = op_name(l.op());
  EXPECT_LT(max_rel_err(h.y.data(), f.y.data(), f.y.size()), out_tol) << name << " y";
  EXPECT_LT(max_rel_err(h.dx.data(), f.dx.data(), f.dx.size()), out_tol) << name << " dx";
  EXPECT_LT(max_rel_err(h.grads.data(), f.grads.data(), f.grads.size()), 1e-4) << name << " dW, db";
  if (rounds_output(k)) {
    EXPECT_TRUE(bf16_exact(h.y)) << name << " y is not bf16-exact";
  }
  if (rounds_dx(k)) {  // the AMP step skips its rounding pass over dx then
    EXPECT_TRUE(bf16_exact(h.dx)) << name << " dx is not bf16-exact";
  }
}
}  // namespace

TEST(NativeBf16, ConvAndLinearMatchFp32OnBf16Operands) {
  SKIP_UNLESS_NATIVE();
  auto m = make_model("net128");
  m->init(3);
  for (Param* p : m->params()) round_bf16(p->value);
  Shape in = m->input_shape(6);
  int checked = 0;
  for (Layer* l : m->layers()) {
    const Shape os = l->out_shape(in);
    if (l->op() == Op::conv2d || l->op() == Op::linear) {
      expect_native_matches(*l, in, 5, l->op() == Op::conv2d ? kRoundedTol : 1e-4);
      ++checked;
    }
    in = os;
  }
  EXPECT_EQ(checked, 5);  // conv1, conv2, fc1..fc3
}

// GPT-2's LM head on the token embedding (lm_head_bf16): the V real rows of wte [Vp, C] in bf16,
// y, dx and wte's gradient as the fp32 path gives them (the padded rows' gradient stays zero).
TEST(NativeBf16, TiedLmHeadMatchesFp32OnBf16Operands) {
  SKIP_UNLESS_NATIVE();
  Embedding wte("wte", 40, 24);
  wte.init(3);
  round_bf16(wte.weight().value);
  TiedLMHead head(&wte, 37);
  expect_native_matches(head, Shape{3, 5, 24}, 9, 1e-4);
  const Out h = run_step(head, StepKind::lm_head_bf16, Shape{3, 5, 24}, std::vector<float>(3 * 5 * 24, 0.5f),
                         std::vector<float>(3 * 5 * 37, 1.f));
  for (std::size_t i = std::size_t(37) * 24; i < h.grads.size(); ++i) ASSERT_EQ(h.grads[i], 0.f) << i;
}

// Behind ReLU + MaxPool2d a conv's gradients run over dy's nonzeros, in bf16 too (vdpbf16ps,
// kernels/cpu/conv2d.h): net128's conv2 with a pool's one-in-four dy (conv_sparse_dy_bf16 against
// conv_sparse_dy), and conv1's filter gradient over its pool's winners (conv_relu_pool_bf16's backward
// against conv_relu_pool's), on bf16 operands: the same exact products, summed in fp32 in another order.
TEST(NativeBf16, SparseConvBackwardsMatchFp32OnBf16Operands) {
  SKIP_UNLESS_NATIVE();
  auto m = make_model("net128");
  m->init(5);
  for (Param* p : m->params()) round_bf16(p->value);
  const auto layers = m->layers();
  ASSERT_TRUE(layers[0]->op() == Op::conv2d && layers[2]->op() == Op::max_pool2d && layers[3]->op() == Op::conv2d);
  auto& conv1 = static_cast<Conv2d&>(*layers[0]);
  auto& pool1 = static_cast<MaxPool2d&>(*layers[2]);
  auto& conv2 = static_cast<Conv2d&>(*layers[3]);
  const Shape in2{6, 128, 14, 14};
  std::vector<float> x2(in2.size()), dy2(conv2.out_shape(in2).size());
  fill_uniform(x2.data(), x2.size(), 11), fill_uniform(dy2.data(), dy2.size(), 12);
  round_bf16(x2), round_bf16(dy2);
  for (std::size_t i = 0; i < dy2.size(); ++i)  // one of each 2x2 window (10 x 10 outputs), by channel
    if ((i % 10) % 2 != (i / 100) % 2 || ((i / 10) % 10) % 2 != (i / 200) % 2) dy2[i] = 0.f;
  const Out f = run_step(conv2, StepKind::conv_sparse_dy, in2, x2, dy2),
            h = run_step(conv2, StepKind::conv_sparse_dy_bf16, in2, x2, dy2);
  EXPECT_LT(max_rel_err(h.dx.data(), f.dx.data(), f.dx.size()), kRoundedTol) << "conv2 dx";  // rounded to bf16
  EXPECT_TRUE(bf16_exact(h.dx)) << "conv2 dx is not bf16-exact";
  EXPECT_LT(max_rel_err(h.grads.data(), f.grads.data(), f.grads.size()), 1e-4) << "conv2 dW, db";

  const Shape in1 = m->input_shape(6), pooled = pool1.out_shape(conv1.out_shape(in1));
  std::vector<float> x1(in1.size()), y1(pooled.size()), g1(pooled.size());
  fill_uniform(x1.data(), x1.size(), 13), fill_uniform(g1.data(), g1.size(), 14);
  round_bf16(x1), round_bf16(g1);
  StepScratch sc;
  conv_relu_pool_forward(conv1, pool1.k, in1, x1.data(), y1.data(), sc);  // fp32: y and the pool's argmax
  std::vector<float> gf, gh;
  for (bool bf16 : {false, true}) {
    for (Param* p : conv1.params()) std::fill(p->grad.begin(), p->grad.end(), 0.f);
    if (bf16) conv_relu_pool_backward_bf16(conv1, pool1.k, in1, x1.data(), y1.data(), g1.data(), sc);
    else conv_relu_pool_backward(conv1, pool1.k, in1, x1.data(), y1.data(), g1.data(), sc);
    for (Param* p : conv1.params()) (bf16 ? gh : gf).insert((bf16 ? gh : gf).end(), p->grad.begin(), p->grad.end());
  }
  EXPECT_LT(max_rel_err(gh.data(), gf.data(), gf.size()), 1e-4) << "conv1 dW, db over the winners";
}

// conv2's bf16 forward from its input handed on in bf16 nChw16c (as the fused first layer writes it):
// the same conv output and pooled output, bit for bit, as from the fp32 NCHW copy of the same values.
TEST(NativeBf16, Nchw16cInputGivesTheSameForward) {
  SKIP_UNLESS_NATIVE();
  auto m = make_model("net128");
  m->init(6);
  for (Param* p : m->params()) round_bf16(p->value);
  ASSERT_EQ(m->layers()[3]->op(), Op::conv2d);
  auto& conv2 = static_cast<Conv2d&>(*m->layers()[3]);
  const Shape in{12, 128, 14, 14};
  std::vector<float> x(in.size());
  fill_uniform(x.data(), x.size(), 15);
  round_bf16(x);
  std::vector<std::uint16_t> x16(x.size());
  for (int n = 0; n < in.n(); ++n)
    for (int c = 0; c < in.c(); ++c)
      for (int p = 0; p < in.h() * in.w(); ++p)
        x16[((std::size_t(n) * (in.c() / 16) + c / 16) * in.h() * in.w() + p) * 16 + c % 16] =
            cpu::fp32_to_bf16_ref(x[(std::size_t(n) * in.c() + c) * in.h() * in.w() + p]);
  ASSERT_TRUE(cpu::onednn::conv2d_forward_reads_nchw16c_src(conv2.conv_shape(in), true));
  const std::size_t pooled = MaxPool2d(2).out_shape(conv2.out_shape(in)).size();
  std::vector<float> ya(pooled, 1.f), yb(pooled, 2.f);
  StepScratch a, b;
  conv_bf16_relu_pool_forward(conv2, in, x.data(), nullptr, ya.data(), a);
  conv_bf16_relu_pool_forward(conv2, in, nullptr, x16.data(), yb.data(), b);
  EXPECT_EQ(a.y16, b.y16);
  EXPECT_EQ(ya, yb);
}

TEST(NativeBf16, ConvTransposeMatchesFp32OnBf16Operands) {
  SKIP_UNLESS_NATIVE();
  auto m = make_model("autoencoder");
  m->init(4);
  for (Param* p : m->params()) round_bf16(p->value);
  Shape in = m->input_shape(3);
  int checked = 0;
  for (Layer* l : m->layers()) {
    const Shape os = l->out_shape(in);
    if (l->op() == Op::conv_transpose2d || l->op() == Op::conv2d) {
      expect_native_matches(*l, in, 7, kRoundedTol);
      checked += l->op() == Op::conv_transpose2d;
    }
    in = os;
  }
  EXPECT_EQ(checked, 3);
}

TEST(NativeBf16, AmpStepTracksTheEmulatedStep) {
  SKIP_UNLESS_NATIVE();
  auto a = make_model("net128"), b = make_model("net128");
  a->init(7), b->init(7);
  const int n = 16;
  std::vector<float> x(std::size_t(n) * 3 * 32 * 32);
  std::vector<std::int32_t> y(n);
  fill_uniform(x.data(), x.size(), 9);
  for (int i = 0; i < n; ++i) y[i] = (i * 3) % 10;
  const Batch bt{x.data(), y.data(), nullptr, n};
  Optimizer oa(default_optimizer("net128"), a->params()), ob(default_optimizer("net128"), b->params());
  AmpTrainer native(*a, oa, DType::bf16), emulated(*b, ob, DType::bf16);
  for (int s = 0; s < 5; ++s) {
    const float ln = native.step(bt);
    float le;
    {
      cpu::IsaLimit below(cpu::Isa::avx512);  // no avx512_bf16: the emulated path
      ASSERT_FALSE(bf16_compute_native());
      le = emulated.step(bt);
    }
    EXPECT_NEAR(ln, le, 1e-2 * std::fabs(le)) << "step " << s;
  }
}

// nn.MultiheadAttention's projections in bf16 (the attention_bf16 step) against its fp32 path, self-
// and cross-attention, on bf16 operands and weights (as autocast hands them over): the in-projection's
// products are exact and only their fp32 sums reorder, but ctx and the inner gradients are rounded to
// bf16 on their way into the next product (as PyTorch's bf16 ops hand them on), so y, dx and the
// gradients agree to bf16's rounding, kRoundedTol.
TEST(NativeBf16, AttentionProjectionsMatchFp32OnBf16Operands) {
  SKIP_UNLESS_NATIVE();
  for (bool cross : {false, true}) {
    SCOPED_TRACE(cross ? "cross-attention" : "self-attention");
    MultiheadAttention::Options o;
    o.cross = cross;
    MultiheadAttention l("attn", 32, 4, o);
    l.init(7);
    for (Param* p : l.params()) round_bf16(p->value);
    const Shape q{3, 8, 32}, kv{3, 6, 32};
    const Shape ins[2] = {q, kv};
    const int n_in = cross ? 2 : 1;
    std::vector<float> xq(q.size()), xkv(kv.size()), dy(q.size());
    fill_uniform(xq.data(), xq.size(), 21), fill_uniform(xkv.data(), xkv.size(), 22), fill_uniform(dy.data(), dy.size(), 23);
    round_bf16(xq), round_bf16(xkv), round_bf16(dy);
    Out r[2];
    for (int v = 0; v < 2; ++v) {
      Out& o2 = r[v];
      o2.y.assign(q.size(), 0.f), o2.dx.assign(q.size() + (cross ? kv.size() : 0), 0.f);
      for (Param* p : l.params()) std::fill(p->grad.begin(), p->grad.end(), 0.f);
      Step s;
      s.kind = v ? StepKind::attention_bf16 : StepKind::layer;
      Layer* ls[1] = {&l};
      const void* xs[2] = {xq.data(), xkv.data()};
      float* dxs[2] = {o2.dx.data(), o2.dx.data() + q.size()};
      StepScratch sc;
      step_forward(s, StepArgs{ls, Shapes(ins, n_in), xs, o2.y.data()}, sc);
      step_backward(s, StepArgs{ls, Shapes(ins, n_in), xs, o2.y.data(), dy.data(), dxs}, sc);
      for (Param* p : l.params()) o2.grads.insert(o2.grads.end(), p->grad.begin(), p->grad.end());
    }
    EXPECT_FALSE(l.bf16);  // the step's flag is for its call only
    EXPECT_LT(max_rel_err(r[1].y.data(), r[0].y.data(), r[0].y.size()), kRoundedTol) << "y";
    EXPECT_LT(max_rel_err(r[1].dx.data(), r[0].dx.data(), r[0].dx.size()), kRoundedTol) << "dx";
    EXPECT_LT(max_rel_err(r[1].grads.data(), r[0].grads.data(), r[0].grads.size()), kRoundedTol) << "dW, db";
    EXPECT_GT(max_rel_err(r[1].y.data(), r[0].y.data(), r[0].y.size()), 0.0) << "the bf16 path did not run";
  }
}
