// The autocast policy (models/amp.h) per op and dtype, PyTorch's rules, and the dtype/device rules.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kernels/common/errors.h"
#include "models/amp.h"

using namespace dlb;
using namespace dlb::models;

TEST(AutocastPolicy, MatrixProductsRunInTheHalfTypeWithFp32Accumulation) {
  for (DType t : {DType::fp16, DType::bf16})
    for (const char* op : {"conv2d", "conv_transpose2d", "linear", "matmul", "bmm", "addmm"}) {
      const CastPolicy p = cast_policy(op, t);
      EXPECT_EQ(p.kind, CastKind::lower_precision) << op;
      EXPECT_EQ(p.compute, t) << op;
      EXPECT_EQ(p.accumulate, DType::fp32) << op;
      EXPECT_EQ(p.output, t) << op;
    }
}

TEST(AutocastPolicy, SensitiveOpsRunInFp32) {
  for (DType t : {DType::fp16, DType::bf16})
    for (const char* op : {"softmax", "log_softmax", "cross_entropy", "nll_loss", "mse_loss", "sum", "mean", "exp",
                           "layer_norm"}) {
      const CastPolicy p = cast_policy(op, t, t);  // even with a half-type input
      EXPECT_EQ(p.kind, CastKind::fp32) << op;
      EXPECT_EQ(p.compute, DType::fp32) << op;
      EXPECT_EQ(p.output, DType::fp32) << op;
    }
}

TEST(AutocastPolicy, ElementwiseAndPoolingKeepTheInputType) {
  for (const char* op : {"relu", "sigmoid", "max_pool2d", "flatten", "add", "dropout"}) {
    EXPECT_EQ(cast_kind(op), CastKind::input_type) << op;
    EXPECT_EQ(cast_policy(op, DType::bf16, DType::bf16).compute, DType::bf16) << op;
    EXPECT_EQ(cast_policy(op, DType::bf16, DType::bf16).output, DType::bf16) << op;
    EXPECT_EQ(cast_policy(op, DType::fp16, DType::fp32).output, DType::fp32) << op;  // fp32 in, fp32 out
  }
  EXPECT_EQ(cast_kind("cat"), CastKind::promote);
  EXPECT_EQ(cast_policy("cat", DType::fp16, DType::fp32).output, DType::fp32);
}

TEST(AutocastPolicy, MasterWeightsAndOptimizerStayFp32) {
  for (DType t : {DType::fp16, DType::bf16, DType::tf32})
    for (const char* op : {"sgd", "adam"}) EXPECT_EQ(cast_policy(op, t).compute, DType::fp32) << op;
}

TEST(AutocastPolicy, Fp32AndTf32Modes) {
  // autocast off: nothing changes dtype
  for (const auto& e : autocast_table()) {
    const CastPolicy p = cast_policy(e.op, DType::fp32);
    EXPECT_EQ(p.compute, DType::fp32) << e.op;
    EXPECT_EQ(p.output, DType::fp32) << e.op;
  }
  // TF32: matrix products on tensor cores with fp32 tensors in and out; the rest plain fp32
  const CastPolicy c = cast_policy("conv2d", DType::tf32);
  EXPECT_EQ(c.compute, DType::tf32);
  EXPECT_EQ(c.output, DType::fp32);
  EXPECT_EQ(cast_policy("softmax", DType::tf32).compute, DType::fp32);
  EXPECT_EQ(cast_policy("relu", DType::tf32).compute, DType::fp32);
}

TEST(AutocastPolicy, TableIsConsistent) {
  std::set<std::string> seen;
  for (const auto& e : autocast_table()) {
    EXPECT_TRUE(seen.insert(e.op).second) << "duplicate op " << e.op;
    EXPECT_EQ(cast_kind(e.op), e.kind);
  }
  EXPECT_GE(seen.size(), 30u);
  EXPECT_THROW(cast_kind("frobnicate"), std::invalid_argument);
  EXPECT_STREQ(cast_kind_name(CastKind::lower_precision), "lower_precision");
}

TEST(AmpDtypes, CpuRunsFp32AndBf16Only) {
  EXPECT_TRUE(dtype_supported(DType::fp32, false));
  EXPECT_TRUE(dtype_supported(DType::bf16, false));
  EXPECT_FALSE(dtype_supported(DType::fp16, false));
  EXPECT_FALSE(dtype_supported(DType::tf32, false));
  for (DType t : {DType::fp32, DType::tf32, DType::fp16, DType::bf16}) EXPECT_TRUE(dtype_supported(t, true));
  EXPECT_NO_THROW(check_dtype_for_device(DType::bf16, false));
  try {
    check_dtype_for_device(DType::fp16, false);
    FAIL() << "fp16 on the CPU must be a usage error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("fp16"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("GPU"), std::string::npos);
  }
  EXPECT_THROW(check_dtype_for_device(DType::fp64, true), UsageError);
  EXPECT_TRUE(needs_loss_scaling(DType::fp16));
  EXPECT_FALSE(needs_loss_scaling(DType::bf16));
}

// ---- the policy applied to a training step (AmpTrainer on a CPU Model) ----
#include <cmath>
#include <cstdio>

#include "kernels/common/verify.h"
#include "models/half.h"
#include "models/net.h"
#include "tests/train_test_data.h"

namespace {
struct Data {
  std::vector<float> x;
  std::vector<std::int32_t> y;
  Data(int n, int per) : x(std::size_t(n) * per), y(n) {
    fill_uniform(x.data(), x.size(), 21);
    for (int i = 0; i < n; ++i) y[i] = (i * 7) % 10;
  }
};
bool all_bf16(const std::vector<float>& v) {
  for (float f : v)
    if (from_bf16(to_bf16(f)) != f) return false;
  return true;
}
}  // namespace

// fp32 runs the model's own plan: the same bits as train_step.
TEST(AmpTrainer, Fp32IsTheModelsOwnStep) {
  for (const std::string name : {"mlp", "net128"}) {
    auto a = make_model(name), b = make_model(name);
    a->init(2), b->init(2);
    const Shape in = a->input_shape(4);
    Data d(4, int(in.per_item()));
    Optimizer oa(default_optimizer(name), a->params()), ob(default_optimizer(name), b->params());
    AmpTrainer t(*b, ob, DType::fp32);
    for (int i = 0; i < 3; ++i) {
      const Batch bt{d.x.data(), d.y.data(), nullptr, 4};
      const float la = train_step(*a, oa, bt), lb = t.step(bt);
      ASSERT_EQ(la, lb) << name;
    }
    for (std::size_t p = 0; p < a->params().size(); ++p)
      EXPECT_EQ(b->params()[p]->value, a->params()[p]->value) << name << " " << a->params()[p]->name;
  }
}

TEST(AmpTrainer, Bf16RoundsWhatThePolicySaysAndKeepsFp32Masters) {
  auto a = make_model("mlp"), b = make_model("mlp");
  a->init(4), b->init(4);
  Data d(16, 784);
  const Batch bt{d.x.data(), d.y.data(), nullptr, 16};
  Optimizer oa(default_optimizer("mlp"), a->params()), ob(default_optimizer("mlp"), b->params());
  AmpTrainer t(*b, ob, DType::bf16);
  EXPECT_FALSE(t.scaler().config().enabled);  // bf16 needs no loss scaling
  const float lf = train_step(*a, oa, bt);
  b->zero_grad();
  const float lh = t.step(bt);
  EXPECT_NE(lf, lh);                       // rounding happened
  EXPECT_NEAR(lh, lf, 1e-2 * std::fabs(lf));
  // gradients of linear layers come out of a bf16 GEMM; masters after the fp32 Adam step are not bf16
  for (Param* p : b->params()) {
    EXPECT_TRUE(all_bf16(p->grad)) << p->name;
    EXPECT_FALSE(all_bf16(p->value)) << p->name;
  }
  // losses over several steps stay within bf16's tolerance of fp32
  for (int i = 0; i < 10; ++i) EXPECT_NEAR(t.step(bt), train_step(*a, oa, bt), 2e-2 * lf);
}

TEST(AmpTrainer, EveryLayerKindHasARule) {
  for (const auto& name : model_names()) {
    auto m = make_model(name);
    Optimizer o(default_optimizer(name), m->params());
    EXPECT_NO_THROW(AmpTrainer(*m, o, DType::bf16)) << name;
  }
}

TEST(AmpTrainer, Bf16ConvGradientsComeFromBf16Products) {
  auto a = make_model("net128"), b = make_model("net128");
  a->init(6), b->init(6);
  Data d(32, 3 * 32 * 32);
  const Batch bt{d.x.data(), d.y.data(), nullptr, 32};
  Optimizer oa(default_optimizer("net128"), a->params()), ob(default_optimizer("net128"), b->params());
  AmpTrainer t(*b, ob, DType::bf16);
  const float lf = train_step(*a, oa, bt), lh = t.step(bt);
  EXPECT_NEAR(lh, lf, 1e-2 * std::fabs(lf));
  for (Param* p : b->params()) EXPECT_TRUE(all_bf16(p->grad)) << p->name;
  // and they point where the fp32 gradients point: at init the gradient of a layer is a sum of
  // per-sample terms that largely cancel, so bf16's 2^-9 relative rounding of the terms shows up
  // as up to tens of percent element-wise; the direction (cosine) must stay close to 1.
  for (std::size_t i = 0; i < a->params().size(); ++i) {
    const Param* pa = a->params()[i];
    const Param* pb = b->params()[i];
    double dot = 0, na = 0, nb = 0;
    for (std::size_t j = 0; j < pa->size(); ++j)
      dot += double(pa->grad[j]) * pb->grad[j], na += double(pa->grad[j]) * pa->grad[j], nb += double(pb->grad[j]) * pb->grad[j];
    const double cosine = dot / std::sqrt(na * nb);
    EXPECT_NE(pa->grad, pb->grad) << pa->name;
    EXPECT_GT(cosine, 0.98) << pa->name;
    std::printf("%-14s cosine(bf16 grad, fp32 grad) = %.5f\n", pa->name.c_str(), cosine);
  }
}

// The bound the amp suite and the GPU trainer's tests hold half-type gradients to
// (kHalfGradientL2Tolerance, per tensor in L2), checked on the CPU's autocast step of every seed
// model in fp16 and bf16 from PyTorch-style init on random data: one step's loss within the dtype's
// tolerance and every gradient within the bound, not bit-identical to fp32. (At init the largest
// element-wise errors reach 0.37 of a tensor's largest gradient in bf16: a max-norm bound would fail.)
TEST(AmpTrainer, HalfGradientsWithinTheL2Tolerance) {
  for (const std::string name : {"net128", "mlp", "convnet", "autoencoder"})
    for (DType t : {DType::fp16, DType::bf16}) {
      SCOPED_TRACE(name + " " + dtype_name(t));
      auto a = make_model(name), b = make_model(name);
      a->init(5), b->init(5);
      const Dataset d = test::random_dataset(a->input_shape(1), 16, 3, name == "autoencoder");
      const Batch bt{d.images.data(), d.labels.data(), nullptr, 16};
      Optimizer ob(default_optimizer(name), b->params());
      AmpTrainer tr(*b, ob, t);
      a->zero_grad();
      const float lf = a->forward_backward(bt), lh = tr.step(bt);
      EXPECT_NEAR(lh, lf, default_tolerance(t) * std::fabs(lf));
      std::string which;
      const double err = b->gradient_l2_error(*a, which);
      EXPECT_LE(err, kHalfGradientL2Tolerance) << which;
      EXPECT_GT(err, 0.0) << "bit-identical to fp32: the " << dtype_name(t) << " path did not run";
    }
}
