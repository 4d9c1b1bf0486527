// The CUDA trainer under autocast (TrainOptions::dtype, models/cuda/gpu_trainer.cu): tf32/fp16/bf16
// gradients of one step against the CPU's fp32 ones; the fp16 loss scaler on the device (an
// overflowing scale skips the step, leaves the weights alone and halves; clean steps grow it); the
// half weight copy follows the fp32 masters after each step; the CUDA-graph step agrees with the
// eager one; training under every dtype lowers the loss. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>
#include <memory>

#include "kernels/common/verify.h"
#include "kernels/cuda/cuda_util.h"
#include "tests/gpu_test.h"
#include "tests/train_test_data.h"
#include "models/net.h"
#include "models/trainer.h"

using namespace dlb;
using namespace dlb::models;

namespace {

using test::random_dataset;

TrainOptions gpu(DType t, bool graph = false, InputMode m = InputMode::pageable) {
  TrainOptions o;
  o.device = "cuda:0", o.input = m, o.cuda_graph = graph, o.dtype = t;
  return o;
}

std::vector<std::vector<float>> values(Model& m) {
  std::vector<std::vector<float>> v;
  for (Param* p : m.params()) v.push_back(p->value);
  return v;
}

// One step on the GPU in `t` against the CPU's fp32 from the same weights: the loss's relative error
// and the gradients' largest per-tensor L2 error (Model::gradient_l2_error, as the amp suite judges
// them; a max-norm bound fails a correct autocast step: test_policy_amp.cpp).
struct StepError {
  double loss = 0, grad = 0;
  std::string tensor;  // the worst gradient's
};
// `cpu` is a fresh model of the GPU model's architecture (its weights are copied in here).
StepError step_error(Model& gpu_model, Trainer& t, std::unique_ptr<Model> cpu, const Batch& b) {
  cpu->copy_params_from(gpu_model);
  cpu->zero_grad();
  const float ref = cpu->forward_backward(b);
  const float got = t.gradients(b);
  StepError e;
  e.loss = std::abs(got - ref) / std::max(1e-12f, std::abs(ref));
  e.grad = gpu_model.gradient_l2_error(*cpu, e.tensor);
  return e;
}

}  // namespace

class AmpGpuStep : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

TEST_P(AmpGpuStep, GradientsMatchCpuFp32WithinTheDtypeTolerance) {
  SKIP_WITHOUT_GPU();
  const auto [name, t] = GetParam();
  auto dev = make_model(name);
  dev->init(5);
  Dataset d = random_dataset(dev->input_shape(1), 16, 3, name == "autoencoder");
  const Batch b{d.images.data(), d.labels.data(), nullptr, 16};
  auto tr = make_trainer(*dev, default_optimizer(name), gpu(t));
  const StepError e = step_error(*dev, *tr, make_model(name), b);
  EXPECT_LE(e.loss, 4 * default_tolerance(t)) << name << " " << dtype_name(t);  // the margin it had
  EXPECT_LE(e.grad, kHalfGradientL2Tolerance) << name << " " << dtype_name(t) << " " << e.tensor;
  EXPECT_GT(e.grad, 0.0) << "bit-identical to fp32: the " << dtype_name(t) << " path did not run";
}

INSTANTIATE_TEST_SUITE_P(SeedModels, AmpGpuStep,
                         ::testing::Combine(::testing::Values("net128", "mlp", "convnet", "autoencoder"),
                                            ::testing::Values(DType::tf32, DType::fp16, DType::bf16)),
                         [](const ::testing::TestParamInfo<AmpGpuStep::ParamType>& i) {
                           return std::get<0>(i.param) + "_" + dtype_name(std::get<1>(i.param));
                         });

TEST(AmpGpuScaler, OverflowSkipsTheStepAndBacksOff) {
  SKIP_WITHOUT_GPU();
  for (const std::string name : {"net128", "mlp"}) {  // SGD and Adam
    auto m = make_model(name);
    m->init(2);
    const auto before = values(*m);
    Dataset d = random_dataset(m->input_shape(1), 8, 6);
    TrainOptions o = gpu(DType::fp16);
    o.scaler.init_scale = 0x1p100f;  // the scaled loss gradient overflows fp16 at once
    auto t = make_trainer(*m, default_optimizer(name), o);
    const double loss = t->train_epoch(d, 8);
    EXPECT_TRUE(std::isfinite(loss)) << "the reported loss is unscaled";
    EXPECT_EQ(t->loss_scale(), 0x1p99f) << name;
    t->sync_to_host();
    EXPECT_EQ(values(*m), before) << name << ": a skipped step must not touch the weights";
  }
}

TEST(AmpGpuScaler, CleanStepsGrowTheScale) {
  SKIP_WITHOUT_GPU();
  auto m = make_net(16);
  m->init(2);
  Dataset d = random_dataset(m->input_shape(1), 24, 7);
  TrainOptions o = gpu(DType::fp16);
  o.scaler.init_scale = 1024.0f, o.scaler.growth_interval = 3;
  auto t = make_trainer(*m, default_optimizer("net128"), o);
  EXPECT_EQ(t->loss_scale(), 1024.0f);
  t->train_epoch(d, 8);  // 3 finite steps
  EXPECT_EQ(t->loss_scale(), 2048.0f);
  t->sync_to_host();
  auto fresh = make_net(16);
  fresh->init(2);
  EXPECT_NE(values(*m), values(*fresh)) << "the finite steps were taken";
}

TEST(AmpGpu, HalfWeightsFollowTheMasterWeights) {
  SKIP_WITHOUT_GPU();
  for (DType t : {DType::fp16, DType::bf16}) {
    auto m = make_net(16);
    m->init(3);
    Dataset d = random_dataset(m->input_shape(1), 32, 8);
    OptimizerConfig c = default_optimizer("net128");
    c.lr = 0.01f;  // 4 steps move the weights far enough to tell: on the CPU, the gradients at the
                   // weights 4 steps back differ by 0.91 (L2, the worst tensor; 0.29 at lr 0.001)
    auto tr = make_trainer(*m, c, gpu(t));
    tr->train_epoch(d, 8);
    tr->sync_to_host();  // the masters after 4 steps
    const Batch b{d.images.data(), d.labels.data(), nullptr, 8};
    // The next step's gradients come from the half copy of these masters, so they must match the
    // CPU's gradients at the masters (a stale copy would be 4 steps behind).
    const StepError e = step_error(*m, *tr, make_net(16), b);  // m is make_net(16), not net128
    EXPECT_LE(e.grad, kHalfGradientL2Tolerance) << dtype_name(t) << " " << e.tensor;
  }
}

TEST(AmpGpu, GraphStepAgreesWithEagerStep) {
  SKIP_WITHOUT_GPU();
  for (DType t : {DType::tf32, DType::fp16, DType::bf16}) {
    auto base = make_net(16);
    base->init(4);
    Dataset d = random_dataset(base->input_shape(1), 64, 9);
    double loss[2], scale[2];
    for (int graph = 0; graph < 2; ++graph) {
      auto m = make_net(16);
      m->copy_params_from(*base);
      auto tr = make_trainer(*m, default_optimizer("net128"), gpu(t, graph == 1, InputMode::resident));
      tr->train_epoch(d, 16);
      loss[graph] = tr->train_epoch(d, 16);
      scale[graph] = tr->loss_scale();
    }
    // cuDNN's backward algorithms may sum in a different order run to run: equal to rounding.
    EXPECT_NEAR(loss[1], loss[0], 1e-3 * std::abs(loss[0])) << dtype_name(t);
    EXPECT_EQ(scale[1], scale[0]) << dtype_name(t);
  }
}

TEST(AmpGpu, EveryDtypeLowersTheLoss) {
  SKIP_WITHOUT_GPU();
  for (DType t : {DType::fp32, DType::tf32, DType::fp16, DType::bf16}) {
    auto m = make_model("mlp");
    m->init(6);
    Dataset d = random_dataset(m->input_shape(1), 256, 10);
    auto tr = make_trainer(*m, default_optimizer("mlp"), gpu(t));
    const double first = tr->train_epoch(d, 32);
    double last = first;
    for (int e = 0; e < 5; ++e) last = tr->train_epoch(d, 32);
    EXPECT_TRUE(std::isfinite(last)) << dtype_name(t);
    EXPECT_LT(last, 0.9 * first) << dtype_name(t) << ": Adam on 256 random images should fit them";
    EXPECT_GT(tr->evaluate(d, 64), 0.2) << dtype_name(t) << ": better than chance on the training set";
  }
}

TEST(AmpGpu, UnknownDtypeIsAUsageError) {
  SKIP_WITHOUT_GPU();
  auto m = make_net(16);
  m->init(1);
  EXPECT_THROW(make_trainer(*m, default_optimizer("net128"), gpu(DType::fp64)), UsageError);
}
