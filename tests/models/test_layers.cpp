// Gradient checks: every layer's fp64 reference backward against central finite differences, and
// the fast fp32 path against the fp64 reference; losses and optimizers against their formulas; the
// elementwise kernels split over the kernel threads give the single-threaded bits.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/common/errors.h"
#include "kernels/common/verify.h"
#include "kernels/cpu/bf16_cast.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/nn_ops.h"
#include "kernels/cpu/threads.h"
#include "models/net.h"
#include "tests/layer_check.h"

using namespace dlb;
using namespace dlb::models;
using layertest::expect_ok;
using layertest::gradcheck;


TEST(GradCheck, Conv2dStridePad) {
  Model m("t", {1, 3, 7, 7}, LossKind::mse);
  m.add<Conv2d>("c", 3, 4, 3, 2, 1);
  expect_ok(gradcheck(m, 2));
}

TEST(GradCheck, Conv2dValid5x5) {
  Model m("t", {1, 2, 9, 8}, LossKind::mse);
  m.add<Conv2d>("c", 2, 3, 5);
  expect_ok(gradcheck(m, 3));
}

TEST(GradCheck, ConvTranspose2dStrideOutputPadding) {
  Model m("t", {1, 4, 4, 4}, LossKind::mse);
  m.add<ConvTranspose2d>("d", 4, 3, 3, 2, 1, 1);
  EXPECT_EQ(m.output_shape(2), (Shape{2, 3, 8, 8}));
  expect_ok(gradcheck(m, 2));
}

TEST(GradCheck, ConvTranspose2dFrom1x1) {
  Model m("t", {1, 5, 1, 1}, LossKind::mse);
  m.add<ConvTranspose2d>("d", 5, 2, 7);
  EXPECT_EQ(m.output_shape(2), (Shape{2, 2, 7, 7}));
  expect_ok(gradcheck(m, 2));
}

TEST(GradCheck, Linear) {
  Model m("t", {1, 6}, LossKind::mse);
  m.add<Linear>("l", 6, 4);
  expect_ok(gradcheck(m, 5));
}

TEST(GradCheck, ReLUAndFlatten) {
  Model m("t", {1, 2, 3, 3}, LossKind::mse);
  m.add<Conv2d>("c", 2, 2, 1).add<ReLU>().add<Flatten>().add<Linear>("l", 18, 3);
  expect_ok(gradcheck(m, 4));
}

TEST(GradCheck, Sigmoid) {
  Model m("t", {1, 3, 2, 2}, LossKind::mse);
  m.add<Conv2d>("c", 3, 2, 1).add<Sigmoid>();
  expect_ok(gradcheck(m, 3));
}

TEST(GradCheck, MaxPool2d) {
  Model m("t", {1, 2, 6, 5}, LossKind::mse);
  m.add<Conv2d>("c", 2, 3, 1).add<MaxPool2d>(2);
  EXPECT_EQ(m.output_shape(2), (Shape{2, 3, 3, 2}));
  expect_ok(gradcheck(m, 2));
}

// ReLU followed by MaxPool2d runs fused on the fast path (pool, then ReLU; one-pass backward): odd
// sizes leave a column the pool never reads, whose gradient must stay zero.
TEST(GradCheck, ReLUMaxPoolFusedOddSize) {
  Model m("t", {1, 2, 6, 5}, LossKind::mse);
  m.add<Conv2d>("c", 2, 3, 1).add<ReLU>().add<MaxPool2d>(2);
  EXPECT_EQ(m.output_shape(1), (Shape{1, 3, 3, 2}));
  expect_ok(gradcheck(m, 1));
  expect_ok(gradcheck(m, 3, false, 11));
}

// A first Conv2d with wide K over a shallow C*R*S, then ReLU + MaxPool2d: where the CPU has AVX2 the
// three run as one pass per image (cpu::conv2d_forward_relu_pool; backward from the pooled gradient),
// odd P leaving a row the pool never reads; the fp32 gradients against the fp64 reference either way.
TEST(GradCheck, FirstConvReluPoolFused) {
  Model m("t", {1, 3, 13, 12}, LossKind::cross_entropy);
  m.add<Conv2d>("c", 3, 36, 3).add<ReLU>().add<MaxPool2d>(2).add<Flatten>().add<Linear>("l", 36 * 5 * 5, 4);
  EXPECT_EQ(cpu::conv2d_relu_pool_fusable(Conv2dShape::make(3, 3, 13, 12, 36, 3, 3), 2), cpu::isa_allows(cpu::Isa::avx2));
  expect_ok(gradcheck(m, 3, true));
  expect_ok(gradcheck(m, 1, true, 5));
}

TEST(GradCheck, CrossEntropy) {
  Model m("t", {1, 7}, LossKind::cross_entropy);
  m.add<Linear>("l", 7, 5);
  expect_ok(gradcheck(m, 6, true));
}

TEST(GradCheck, SmallLectureNet) {
  auto m = make_net(6);  // the lecture's architecture with 6 hidden channels
  expect_ok(gradcheck(*m, 2, true));
}

TEST(GradCheck, SmallAutoencoder) {
  auto m = make_autoencoder(1, 28, 28, 4);
  expect_ok(gradcheck(*m, 1, false, 7, 1e-4));
}

// ---- graphs: several inputs, a value read by several layers, integer inputs, a tied weight ----

namespace {
// Test-only layers for what the zoo does not build yet (Op::custom): a token lookup (an integer
// input, a scatter-add backward) and a head reading the lookup's table through a borrowed pointer
// (a tied weight, as GPT-2's LM head reads its token embedding).
class Lookup final : public Layer {
 public:
  Lookup(int vocab, int dim) : dim(dim) {
    table.name = "lookup.weight";
    table.resize({vocab, dim});
  }
  Op op() const override { return Op::custom; }
  bool integer_input(int) const override { return true; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<Lookup>(*this); }
  Shape out_shape(Shapes in) const override { return {in[0].n(), in[0][1], dim}; }  // [n, seq] -> [n, seq, dim]
  std::vector<Param*> params() override { return {&table}; }
  void init(std::uint64_t seed) override { fill_uniform_bound(table.value.data(), table.size(), 1.f, seed); }
  void forward(const Fwd<float>& a) override { fwd(a, table.value.data()); }
  void backward(const Bwd<float>& a) override { bwd(a, table.grad.data()); }
  void forward_ref(const Fwd<double>& a) override { fwd(a, table.ref_value.data()); }
  void backward_ref(const Bwd<double>& a) override { bwd(a, table.ref_grad.data()); }
  Param table;
  int dim;

 private:
  template <class T, class W>
  void fwd(const Fwd<T>& a, const W* w) {
    for (std::size_t p = 0; p < a.in[0].size(); ++p)
      for (int j = 0; j < dim; ++j) a.y[p * dim + j] = T(w[std::size_t(a.ids()[p]) * dim + j]);
  }
  template <class T, class W>
  void bwd(const Bwd<T>& a, W* g) {
    for (std::size_t p = 0; p < a.in[0].size(); ++p)
      for (int j = 0; j < dim; ++j) g[std::size_t(a.ids()[p]) * dim + j] += W(a.dy[p * dim + j]);
  }
};

class TiedHead final : public Layer {
 public:
  explicit TiedHead(Lookup& l) : w(&l.table), vocab(l.table.shape[0]), dim(l.dim) {}
  Op op() const override { return Op::custom; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<TiedHead>(*this); }
  Shape out_shape(Shapes in) const override { return {in[0].n(), in[0][1], vocab}; }
  std::vector<Param*> params() override { return {w}; }
  std::vector<Param**> borrowed() override { return {&w}; }
  void forward(const Fwd<float>& a) override { fwd(a, w->value.data()); }
  void backward(const Bwd<float>& a) override { bwd(a, w->value.data(), w->grad.data()); }
  void forward_ref(const Fwd<double>& a) override { fwd(a, w->ref_value.data()); }
  void backward_ref(const Bwd<double>& a) override { bwd(a, w->ref_value.data(), w->ref_grad.data()); }
  Param* w;
  int vocab, dim;

 private:
  template <class T, class W>
  void fwd(const Fwd<T>& a, const W* wt) {  // logits[p, v] = h[p, :] . W[v, :]
    const std::size_t rows = a.in[0].size() / std::size_t(dim);
    for (std::size_t p = 0; p < rows; ++p)
      for (int v = 0; v < vocab; ++v) {
        T acc = 0;
        for (int j = 0; j < dim; ++j) acc += a.x()[p * dim + j] * T(wt[std::size_t(v) * dim + j]);
        a.y[p * vocab + v] = acc;
      }
  }
  template <class T, class W>
  void bwd(const Bwd<T>& a, const W* wt, W* g) {
    const std::size_t rows = a.in[0].size() / std::size_t(dim);
    for (std::size_t p = 0; p < rows; ++p)
      for (int v = 0; v < vocab; ++v)
        for (int j = 0; j < dim; ++j) g[std::size_t(v) * dim + j] += W(a.dy[p * vocab + v] * a.x()[p * dim + j]);
    if (!a.dx()) return;
    for (std::size_t p = 0; p < rows; ++p)
      for (int j = 0; j < dim; ++j) {
        T acc = 0;
        for (int v = 0; v < vocab; ++v) acc += a.dy[p * vocab + v] * T(wt[std::size_t(v) * dim + j]);
        a.dx()[p * dim + j] = acc;
      }
  }
};
}  // namespace

// Two branches summed: x -> fc -> h; relu(h) + fc2(h) (h read by two layers: its gradient is the
// sum of both) -> fc3. The fp32 executor and the fp64 reference walk the same graph.
TEST(GradCheck, TwoBranchesSummed) {
  Model m("t", {1, 6}, LossKind::cross_entropy);
  const int h = m.node<Linear>({0}, "fc", 6, 8);
  const int r = m.node<ReLU>({h});
  const int q = m.node<Linear>({h}, "fc2", 8, 8);
  m.node<Linear>({m.node<Add>({r, q})}, "fc3", 8, 5);
  EXPECT_EQ(m.output_shape(3), (Shape{3, 5}));
  expect_ok(gradcheck(m, 3, true));
}

// What the sequence models need, on a toy: token ids as a second, integer input; tensors of rank 3
// ([n, seq, features], Linear over the last dimension); a residual add; the lookup's table read
// again by the output head (a tied weight, its gradient the sum of both uses); cross-entropy at
// every position.
TEST(GradCheck, TokensTiedWeightAndEveryPosition) {
  const int seq = 3, dim = 4, vocab = 7, n = 2;
  Model m("toy", {1, seq, dim}, LossKind::cross_entropy);
  const int ids = m.add_input({1, seq}, true);
  auto lookup = std::make_unique<Lookup>(vocab, dim);
  Lookup& lk = *lookup;
  const int e = m.node(std::move(lookup), {ids});
  const int a = m.node<Linear>({0}, "proj", dim, dim);
  const int h = m.node<Add>({e, a});
  m.node(std::make_unique<TiedHead>(lk), {m.node<ReLU>({h})});
  EXPECT_EQ(m.output_shape(n), (Shape{n, seq, vocab}));
  EXPECT_EQ(m.params().size(), 3u);  // lookup.weight (once), proj.weight, proj.bias
  std::vector<std::int32_t> tokens{3, 0, 6, 6, 1, 3};
  expect_ok(gradcheck(m, n, true, 7, 1e-6, {tokens.data()}));

  // A copy's head reads the copy's table, not the original's.
  auto c = m.clone();
  auto* head = dynamic_cast<TiedHead*>(c->layers().back());
  auto* table = dynamic_cast<Lookup*>(c->layers().front());
  ASSERT_TRUE(head && table);
  EXPECT_EQ(head->w, &table->table);
  EXPECT_EQ(c->params().size(), 3u);
}

TEST(Loss, CrossEntropyKnownValue) {
  // Uniform logits: loss = log(classes); gradient = (1/C - onehot) / n.
  std::vector<float> z(2 * 4, 0.f), d(8);
  std::vector<std::int32_t> lab{1, 3};
  Batch b{nullptr, lab.data(), nullptr, 2};
  const float l = loss_forward_backward(LossKind::cross_entropy, z.data(), b, z.size(), 4, d.data());
  EXPECT_NEAR(l, std::log(4.0), 1e-6);
  EXPECT_NEAR(d[1], (0.25 - 1) / 2, 1e-7);
  EXPECT_NEAR(d[0], 0.25 / 2, 1e-7);
}

TEST(Loss, LabelOutOfRangeIsInputError) {
  std::vector<float> z(4, 0.f);
  std::vector<std::int32_t> lab{4};
  Batch b{nullptr, lab.data(), nullptr, 1};
  EXPECT_THROW(loss_forward_backward(LossKind::cross_entropy, z.data(), b, 4, 4, nullptr), InputError);
}

TEST(Optimizer, SgdMomentumMatchesPyTorchSemantics) {
  Param p;
  p.resize({2});
  p.value = {1.f, -2.f};
  Optimizer opt({"sgd", 0.1f, 0.9f}, {&p});
  p.grad = {0.5f, 1.f};
  opt.step();  // buf = g; p -= lr * g
  EXPECT_FLOAT_EQ(p.value[0], 1.f - 0.05f);
  p.grad = {0.5f, 1.f};
  opt.step();  // buf = 0.9 * 0.5 + 0.5 = 0.95
  EXPECT_FLOAT_EQ(p.value[0], 0.95f - 0.1f * 0.95f);
  EXPECT_FLOAT_EQ(p.value[1], -2.f - 0.1f - 0.1f * 1.9f);
}

TEST(Optimizer, AdamFirstStepIsLrTimesSign) {
  Param p;
  p.resize({3});
  p.value = {0.f, 1.f, 2.f};
  OptimizerConfig c;
  c.kind = "adam", c.lr = 0.01f;
  Optimizer opt(c, {&p});
  p.grad = {3.f, -0.5f, 1e-3f};
  opt.step();  // m_hat = g, v_hat = g^2 -> step = lr * g / (|g| + eps)
  EXPECT_NEAR(p.value[0], -0.01f, 1e-6);
  EXPECT_NEAR(p.value[1], 1.01f, 1e-6);
  EXPECT_NEAR(p.value[2], 2.f - 0.01f * 1e-3f / (1e-3f + 1e-8f), 1e-6);
}

TEST(Optimizer, RejectsBadConfig) {
  Param p;
  p.resize({1});
  EXPECT_THROW(Optimizer({"rmsprop"}, {&p}), UsageError);
  EXPECT_THROW(Optimizer({"sgd", -1.f}, {&p}), UsageError);
}

TEST(Layers, ShapeMismatchIsInputError) {
  Model m("t", {1, 3, 4, 4}, LossKind::mse);
  m.add<Conv2d>("c", 3, 2, 5);
  EXPECT_THROW(m.output_shape(1), InputError);
  Linear l("l", 10, 2);
  EXPECT_THROW(l.out_shape(Shape{1, 3, 1, 1}), InputError);
}

// ReLU, max pooling (2x2 and 3x3 windows, ragged edges) and SGD split their arrays over the kernel
// threads (large enough here to be split into uneven tasks); every element is computed as on one
// thread, so the results are bit for bit the single-threaded ones.
TEST(ThreadedKernels, SplitGivesTheSingleThreadBits) {
  const int n = 3, c = 37, h = 27, w = 29;
  const std::size_t xs = std::size_t(n) * c * h * w;
  std::vector<float> x(xs), g(xs);
  fill_uniform(x.data(), xs, 21);
  fill_uniform(g.data(), xs, 22);
  struct Out {
    std::vector<float> relu, relu_dx, pool, pool_dx, p, buf;
    std::vector<std::int32_t> arg;
  };
  auto run = [&](int k) {
    Out o;
    o.relu.resize(xs), o.relu_dx.resize(xs);
    cpu::relu_forward(x.data(), o.relu.data(), xs);
    cpu::relu_backward(o.relu.data(), g.data(), o.relu_dx.data(), xs);
    const std::size_t ys = std::size_t(n) * c * (h / k) * (w / k);
    o.pool.resize(ys), o.arg.resize(ys), o.pool_dx.assign(xs, 5.f);
    cpu::maxpool2d_forward(x.data(), o.pool.data(), o.arg.data(), n, c, h, w, k);
    cpu::relu_forward(o.pool.data(), o.pool.data(), ys);
    cpu::maxpool2d_relu_backward(g.data(), o.pool.data(), o.arg.data(), o.pool_dx.data(), n, c, h, w, k);
    o.p = x, o.buf.assign(xs, 0.f);
    cpu::sgd_momentum_step(o.p.data(), g.data(), o.buf.data(), xs, 0.01f, 0.9f, true);
    cpu::sgd_momentum_step(o.p.data(), x.data(), o.buf.data(), xs, 0.01f, 0.9f, false);
    return o;
  };
  for (int k : {2, 3}) {
    SCOPED_TRACE("window " + std::to_string(k));
    const Out threaded = run(k);
    Out single;
    {
      cpu::KernelThreadsLimit one(1);
      single = run(k);
    }
    EXPECT_EQ(threaded.relu, single.relu);
    EXPECT_EQ(threaded.relu_dx, single.relu_dx);
    EXPECT_EQ(threaded.pool, single.pool);
    EXPECT_EQ(threaded.arg, single.arg);
    EXPECT_EQ(threaded.pool_dx, single.pool_dx);
    EXPECT_EQ(threaded.p, single.p);
    EXPECT_EQ(threaded.buf, single.buf);
    // The pool picked real maxima and the backward wrote every element (no 5.f left over).
    for (std::size_t j = 0; j < threaded.pool.size(); ++j) ASSERT_EQ(std::max(0.f, x[threaded.arg[j]]), threaded.pool[j]);
    for (float v : threaded.pool_dx) ASSERT_NE(v, 5.f);
  }
}

// Optimizer::step updates every tensor in slices on the kernel threads (one region): SGD and Adam
// over tensors of several slices and of a few floats give the single-threaded bits.
TEST(Optimizer, SlicedStepEqualsSingleThread) {
  for (const char* kind : {"sgd", "adam"}) {
    SCOPED_TRACE(kind);
    auto run = [&](bool single) {
      std::vector<Param> ps(3);
      ps[0].resize({40000}), ps[1].resize({7}), ps[2].resize({3, 16385});
      for (std::size_t i = 0; i < ps.size(); ++i) fill_uniform(ps[i].value.data(), ps[i].size(), 30 + i);
      OptimizerConfig c;
      c.kind = kind, c.lr = 0.01f;
      Optimizer opt(c, {&ps[0], &ps[1], &ps[2]});
      std::unique_ptr<cpu::KernelThreadsLimit> one;
      if (single) one = std::make_unique<cpu::KernelThreadsLimit>(1);
      for (int step = 0; step < 3; ++step) {
        for (std::size_t i = 0; i < ps.size(); ++i) fill_uniform(ps[i].grad.data(), ps[i].size(), 40 + 3 * step + i);
        opt.step();
      }
      std::vector<std::vector<float>> v;
      for (auto& p : ps) v.push_back(p.value);
      return v;
    };
    const auto threaded = run(false), single = run(true);
    for (std::size_t i = 0; i < threaded.size(); ++i) EXPECT_EQ(threaded[i], single[i]) << "tensor " << i;
    EXPECT_NE(threaded[0][0], 0.f);
  }
}

// The 2x2 pooling kernels (SSE: four windows at a time and a scalar tail; AVX-512: 16 under a mask)
// against a plain loop at each ISA level this CPU has, on inputs full of ties (small integers), NaNs
// and negatives, with ragged right and bottom edges (13 x 9: 6 windows a row = 4 + 2; 37 x 9: 18 =
// 16 + 2): same maxima, same indices (a later element wins when it is strictly greater or NaN), the
// fused ReLU, and a backward that writes every element.
class MaxPool2x2 : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(Widths, MaxPool2x2, ::testing::Values(13, 37));
TEST_P(MaxPool2x2, MatchesPlainLoopAtEveryIsa) {
  const int n = 2, c = 3, h = 9, w = GetParam(), p = h / 2, q = w / 2;
  const std::size_t xs = std::size_t(n) * c * h * w, ys = std::size_t(n) * c * p * q;
  std::vector<float> x(xs), g(ys);
  fill_uniform(x.data(), xs, 51);
  fill_uniform(g.data(), ys, 52);
  for (std::size_t i = 0; i < xs; ++i) x[i] = std::round(x[i] * 2.f);  // -2 .. 2: many ties
  for (std::size_t i = 5; i < xs; i += 17) x[i] = std::nanf("");
  std::vector<float> ref(ys), ref_relu(ys), ref_dx(xs, 0.f);
  std::vector<std::int32_t> ref_arg(ys);
  for (int pl = 0; pl < n * c; ++pl)
    for (int i = 0; i < p; ++i)
      for (int j = 0; j < q; ++j) {
        const int o = pl * h * w + 2 * i * w + 2 * j;
        const int idx[4] = {o, o + 1, o + w, o + w + 1};
        int best = idx[0];
        for (int t = 1; t < 4; ++t)
          if (x[idx[t]] > x[best] || std::isnan(x[idx[t]])) best = idx[t];
        const std::size_t out = (std::size_t(pl) * p + i) * q + j;
        ref[out] = x[best], ref_arg[out] = best;
        ref_relu[out] = x[best] > 0.f ? x[best] : 0.f;
        if (ref_relu[out] > 0.f) ref_dx[best] = g[out];
      }
  for (const cpu::Isa level : {cpu::Isa::avx2, cpu::Isa::avx512}) {
    if (static_cast<int>(level) > static_cast<int>(cpu::isa_cap())) continue;
    SCOPED_TRACE(cpu::isa_name(level));
    cpu::IsaLimit lim(level);
    std::vector<float> y(ys), yr(ys), dx(xs, 9.f);
    std::vector<std::int32_t> arg(ys), argr(ys);
    cpu::maxpool2d_forward(x.data(), y.data(), arg.data(), n, c, h, w, 2);
    cpu::maxpool2d_relu_forward(x.data(), yr.data(), argr.data(), n, c, h, w, 2);
    for (std::size_t i = 0; i < ys; ++i) {
      ASSERT_EQ(arg[i], ref_arg[i]) << i;
      ASSERT_EQ(argr[i], ref_arg[i]) << i;
      ASSERT_TRUE(y[i] == ref[i] || (std::isnan(y[i]) && std::isnan(ref[i]))) << i;
      ASSERT_EQ(yr[i], ref_relu[i]) << i;
    }
    cpu::maxpool2d_relu_backward(g.data(), yr.data(), argr.data(), dx.data(), n, c, h, w, 2);
    EXPECT_EQ(dx, ref_dx);
  }
}

// ReLU + 2x2 max pool reading a bf16 convolution's output in oneDNN's nChw16c layout, and its
// backward writing that layout: the same y, arg and (unblocked) dx as the NCHW kernels, bit for bit,
// on bf16 values full of ties, NaNs and negatives, at every ISA level this CPU has; even and odd
// sizes (a ragged row and column that no window covers).
class Nchw16cPool : public ::testing::TestWithParam<std::pair<int, int>> {};
INSTANTIATE_TEST_SUITE_P(Sizes, Nchw16cPool, ::testing::Values(std::pair{10, 14}, std::pair{11, 13}));
TEST_P(Nchw16cPool, MatchesNchwAtEveryIsa) {
  const int n = 3, c = 32, h = GetParam().first, w = GetParam().second, p = h / 2, q = w / 2;
  const std::size_t xs = std::size_t(n) * c * h * w, ys = std::size_t(n) * c * p * q;
  std::vector<float> x(xs), g(ys);
  fill_uniform(x.data(), xs, 61), fill_uniform(g.data(), ys, 62);
  for (std::size_t i = 0; i < xs; ++i) x[i] = std::round(x[i] * 4.f) / 2.f;  // bf16-exact, many ties
  for (std::size_t i = 7; i < xs; i += 23) x[i] = std::nanf("");
  cpu::round_through_bf16(g.data(), ys);
  std::vector<std::uint16_t> xb(xs);  // NCHW -> nChw16c
  for (int in = 0; in < n; ++in)
    for (int ch = 0; ch < c; ++ch)
      for (int s = 0; s < h * w; ++s)
        xb[((std::size_t(in) * (c / 16) + ch / 16) * h * w + s) * 16 + ch % 16] =
            cpu::fp32_to_bf16_ref(x[(std::size_t(in) * c + ch) * h * w + s]);
  std::vector<float> y(ys), yb(ys), dx(xs);
  std::vector<std::int32_t> arg(ys), argb(ys);
  cpu::maxpool2d_relu_forward(x.data(), y.data(), arg.data(), n, c, h, w, 2);
  cpu::maxpool2d_relu_backward(g.data(), y.data(), arg.data(), dx.data(), n, c, h, w, 2);
  for (const cpu::Isa level : {cpu::Isa::scalar, cpu::Isa::avx512}) {
    if (static_cast<int>(level) > static_cast<int>(cpu::isa_cap())) continue;
    const cpu::IsaLimit lim(level);
    SCOPED_TRACE(cpu::isa_name(level));
    std::vector<std::uint16_t> dxb(xs, 0x7777);
    cpu::maxpool2x2_relu_forward_nchw16c_bf16(xb.data(), yb.data(), argb.data(), n, c, h, w);
    EXPECT_EQ(argb, arg);
    EXPECT_EQ(yb, y);
    cpu::maxpool2x2_relu_backward_nchw16c_bf16(g.data(), yb.data(), argb.data(), dxb.data(), n, c, h, w);
    for (int in = 0; in < n; ++in)
      for (int ch = 0; ch < c; ++ch)
        for (int s = 0; s < h * w; ++s)
          ASSERT_EQ(cpu::bf16_to_fp32_ref(dxb[((std::size_t(in) * (c / 16) + ch / 16) * h * w + s) * 16 + ch % 16]),
                    dx[(std::size_t(in) * c + ch) * h * w + s]);
  }
  // dy not bf16-exact (as the layer above hands it over): the backward rounds it, ties to even, NaN
  // kept, the same bits at every level.
  std::vector<float> g2(ys);
  fill_uniform(g2.data(), ys, 63);
  for (std::size_t i = 0; i < ys; i += 5) g2[i] = cpu::bf16_to_fp32_ref(cpu::fp32_to_bf16_ref(g2[i])) * (1.f + 0x1p-8f);
  g2[1] = std::nanf(""), g2[2] = 3.0e38f;
  std::vector<std::uint16_t> first;
  for (const cpu::Isa level : {cpu::Isa::scalar, cpu::Isa::avx512}) {
    if (static_cast<int>(level) > static_cast<int>(cpu::isa_cap())) continue;
    const cpu::IsaLimit lim(level);
    std::vector<std::uint16_t> dxb(xs, 0x7777);
    cpu::maxpool2x2_relu_backward_nchw16c_bf16(g2.data(), y.data(), arg.data(), dxb.data(), n, c, h, w);
    if (first.empty()) first = dxb;
    else EXPECT_EQ(dxb, first) << cpu::isa_name(level);
  }
}
