// The four seed models: parameter counts and shapes as the seeds give them, output shapes, a few
// training steps that lower the loss, the lecture net's step split over the kernel threads against
// the single-threaded step and the fp64 reference, the trainer's loader helpers and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "kernels/common/errors.h"
#include "kernels/common/verify.h"
#include "kernels/cpu/threads.h"
#include "models/net.h"
#include "models/replicas.h"
#include "models/trainer.h"

using namespace dlb;
using namespace dlb::models;

TEST(Models, LectureNetHas120078Params) {
  auto m = make_net(128);
  EXPECT_EQ(m->num_params(), 120078u);
  EXPECT_EQ(m->output_shape(64), (Shape{64, 10}));
  EXPECT_EQ(m->params()[0]->shape, (std::vector<int>{128, 3, 5, 5}));
}

TEST(Models, MlpIs784_128_10) {
  auto m = make_mlp();
  EXPECT_EQ(m->num_params(), 784u * 128 + 128 + 128 * 10 + 10);
  EXPECT_EQ(m->output_shape(3), (Shape{3, 10}));
}

TEST(Models, ConvNetShapes) {
  auto m = make_convnet();
  const auto p = m->params();
  ASSERT_EQ(p.size(), 8u);
  EXPECT_EQ(p[0]->shape, (std::vector<int>{32, 3, 3, 3}));
  EXPECT_EQ(p[2]->shape, (std::vector<int>{64, 32, 3, 3}));
  EXPECT_EQ(p[4]->shape, (std::vector<int>{128, 64 * 7 * 7}));
  EXPECT_EQ(p[6]->shape, (std::vector<int>{10, 128}));
  EXPECT_EQ(m->output_shape(2), (Shape{2, 10}));
}

TEST(Models, AutoencoderStateDictAsInSeed000) {
  auto m = make_autoencoder();
  const std::vector<std::pair<std::string, std::vector<int>>> want = {
      {"encoder.0.weight", {16, 1, 3, 3}}, {"encoder.0.bias", {16}}, {"encoder.2.weight", {32, 16, 3, 3}},
      {"encoder.2.bias", {32}},            {"encoder.4.weight", {64, 32, 7, 7}}, {"encoder.4.bias", {64}},
      {"decoder.0.weight", {64, 32, 7, 7}}, {"decoder.0.bias", {32}}, {"decoder.2.weight", {32, 16, 3, 3}},
      {"decoder.2.bias", {16}},            {"decoder.4.weight", {16, 1, 3, 3}}, {"decoder.4.bias", {1}}};
  const auto p = m->params();
  ASSERT_EQ(p.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(p[i]->name, want[i].first);
    EXPECT_EQ(p[i]->shape, want[i].second) << want[i].first;
  }
  EXPECT_EQ(m->output_shape(2), (Shape{2, 1, 28, 28}));
}

TEST(Models, InitIsPyTorchBoundAndSeeded) {
  auto a = make_net(128), b = make_net(128);
  a->init(3), b->init(3);
  const Param& w = *a->params()[0];
  const float bound = 1.f / std::sqrt(75.f);
  float mx = 0;
  for (float v : w.value) mx = std::max(mx, std::abs(v));
  EXPECT_LE(mx, bound);
  EXPECT_GT(mx, 0.9f * bound);
  EXPECT_EQ(a->params()[0]->value, b->params()[0]->value);
  b->init(4);
  EXPECT_NE(a->params()[0]->value, b->params()[0]->value);
}

TEST(Models, UnknownModelIsUsageError) { EXPECT_THROW(make_model("resnet"), UsageError); }

TEST(Models, AutoencoderOnTooSmallImagesIsInputError) { EXPECT_THROW(make_model("autoencoder", 1, 8, 8), InputError); }

TEST(Training, FewStepsLowerTheLoss) {
  for (const std::string name : {"net128", "mlp", "convnet", "autoencoder"}) {
    auto m = make_model(name);
    m->init(1);
    const Shape in = m->input_shape(8);
    std::vector<float> x(in.size());
    fill_uniform(x.data(), x.size(), 5);
    if (name == "autoencoder")
      for (float& v : x) v = 0.5f + 0.5f * v;  // sigmoid outputs: targets in [0, 1]
    std::vector<std::int32_t> y(8);
    for (int i = 0; i < 8; ++i) y[i] = i % 10;
    OptimizerConfig c = default_optimizer(name);
    if (name == "net128") c.lr = 0.01f;
    Optimizer opt(c, m->params());
    const Batch b{x.data(), y.data(), nullptr, 8};
    const float first = train_step(*m, opt, b);
    float last = first;
    for (int i = 0; i < 20; ++i) last = train_step(*m, opt, b);
    EXPECT_LT(last, first) << name;
  }
}

// A second copy of a model that takes the first's weights and optimizer state (the amp suite's
// lockstep) steps to the same bits, for SGD with momentum (net128) and Adam (mlp); a state from
// another optimizer is refused.
TEST(Training, OptimizerStateCopyContinuesTheSameRun) {
  for (const std::string name : {"net128", "mlp"}) {
    SCOPED_TRACE(name);
    auto a = make_model(name), b = make_model(name);
    a->init(1), b->init(2);
    const Shape in = a->input_shape(4);
    std::vector<float> x(in.size());
    fill_uniform(x.data(), x.size(), 7);
    std::vector<std::int32_t> y{1, 3, 5, 7};
    const Batch bt{x.data(), y.data(), nullptr, 4};
    const OptimizerConfig c = default_optimizer(name);
    Optimizer oa(c, a->params()), ob(c, b->params());
    for (int i = 0; i < 3; ++i) train_step(*a, oa, bt);  // momentum / moments that are not zero
    const auto pa = a->params(), pb = b->params();
    for (std::size_t i = 0; i < pa.size(); ++i) pb[i]->value = pa[i]->value;
    ob.copy_state_from(oa);
    EXPECT_EQ(ob.steps(), oa.steps());
    EXPECT_EQ(train_step(*a, oa, bt), train_step(*b, ob, bt));
    for (std::size_t i = 0; i < pa.size(); ++i) EXPECT_EQ(pa[i]->value, pb[i]->value) << pa[i]->name;
  }
  auto n = make_model("net128"), m = make_model("mlp");
  OptimizerConfig sgd = default_optimizer("net128"), adam = sgd;
  adam.kind = "adam";
  Optimizer on(sgd, n->params()), om(sgd, m->params()), on_adam(adam, n->params());
  EXPECT_THROW(on.copy_state_from(om), UsageError);      // another model
  EXPECT_THROW(on.copy_state_from(on_adam), UsageError);  // another optimizer
}

// The lecture net's step with the batch split over the kernel threads (batches 1, 2 and an odd 3):
// gradients and loss as the single-threaded step's and the fp64 reference's; two identical
// threaded steps give the same bits.
TEST(Training, ThreadedLectureStepMatchesSingleThreadAndReference) {
  for (int n : {1, 2, 3}) {
    SCOPED_TRACE("batch " + std::to_string(n));
    auto m = make_net();
    m->init(3);
    const Shape in = m->input_shape(n);
    std::vector<float> x(in.size());
    fill_uniform(x.data(), x.size(), 8);
    std::vector<std::int32_t> y(n);
    for (int i = 0; i < n; ++i) y[i] = (3 * i + 1) % 10;
    const Batch b{x.data(), y.data(), nullptr, n};
    auto grads = [&] {
      m->zero_grad();
      const float loss = m->forward_backward(b);
      std::vector<std::vector<float>> g;
      for (Param* p : m->params()) g.push_back(p->grad);
      return std::make_pair(loss, g);
    };
    const auto threaded = grads(), again = grads();
    std::pair<float, std::vector<std::vector<float>>> single;
    {
      cpu::KernelThreadsLimit one(1);
      single = grads();
    }
    m->sync_ref();
    std::vector<double> x64(x.begin(), x.end());
    const double ref_loss = m->forward_backward_ref(x64.data(), b);
    EXPECT_NEAR(threaded.first, ref_loss, 1e-5 * std::abs(ref_loss));
    EXPECT_NEAR(threaded.first, single.first, 1e-6 * std::abs(ref_loss));
    EXPECT_EQ(threaded.first, again.first);
    const auto params = m->params();
    for (std::size_t i = 0; i < params.size(); ++i) {
      SCOPED_TRACE(params[i]->name);
      const auto& g = threaded.second[i];
      EXPECT_LE(max_rel_err(g.data(), params[i]->ref_grad.data(), g.size()), 4 * default_tolerance(DType::fp32));
      EXPECT_LE(max_rel_err(g.data(), single.second[i].data(), g.size()), 4 * default_tolerance(DType::fp32));
      EXPECT_EQ(g, again.second[i]);
    }
  }
}

// The replica step (a model copy per kernel thread, models/replicas.h) against train_step from the same
// start, for each seed model (SGD with momentum and Adam; cross-entropy and MSE) and batches split
// evenly and not: losses and weights agree to rounding, the replicas stay bit for bit equal to the
// model, and they are remade when the weights change outside the step (init) or the optimizer steps
// elsewhere (train_step between two replica steps). Under DLB_CPU_THREADS=3 (its own CTest entry)
// three replicas run.
TEST(Training, ReplicaStepMatchesTrainStepAndStaysInSync) {
  if (ReplicaStep::replicas_for(2) < 2) GTEST_SKIP() << "one kernel thread: no replicas to test";
  for (const std::string name : {"net128", "mlp", "convnet", "autoencoder"}) {
    for (int n : {2, 3, 5}) {
      SCOPED_TRACE(name + ", batch " + std::to_string(n) + ", " + std::to_string(ReplicaStep::replicas_for(n)) +
                   " replicas");
      auto a = make_model(name);
      a->init(3);
      auto c = a->clone();
      std::vector<float> x(a->input_shape(n).size());
      fill_uniform(x.data(), x.size(), 8);
      std::vector<std::int32_t> y(n);
      for (int i = 0; i < n; ++i) y[i] = (3 * i + 1) % 10;
      const Batch b{x.data(), a->loss() == LossKind::mse ? nullptr : y.data(), nullptr, n};
      Optimizer oa(default_optimizer(name), a->params()), oc(default_optimizer(name), c->params());
      ReplicaStep rs;
      auto compare = [&](const char* when) {
        SCOPED_TRACE(when);
        const auto pa = a->params(), pc = c->params();
        for (std::size_t i = 0; i < pa.size(); ++i) {
          L2Error e;
          e.add(pc[i]->value.data(), pa[i]->value.data(), pa[i]->size());
          EXPECT_LE(e.rel(), 1e-5) << pa[i]->name;
        }
        ASSERT_EQ(rs.replicas().size(), std::size_t(ReplicaStep::replicas_for(n) - 1));
        for (const Model* r : rs.replicas()) {
          const auto pr = r->params();
          for (std::size_t i = 0; i < pc.size(); ++i) EXPECT_EQ(pr[i]->value, pc[i]->value) << pc[i]->name;
        }
      };
      auto both = [&] {
        const float la = train_step(*a, oa, b), lc = rs.step(*c, oc, b);
        EXPECT_NEAR(lc, la, 1e-5 * std::abs(la) + 1e-7);
      };
      for (int s = 0; s < 3; ++s) both();
      compare("three steps");
      a->init(11), c->init(11);  // new weights from outside: the replicas must follow
      both();
      compare("after init");
      train_step(*a, oa, b), train_step(*c, oc, b);  // the optimizer stepped elsewhere
      both();
      compare("after a train_step in between");
      EXPECT_EQ(oc.steps(), oa.steps());
    }
  }
}

TEST(Trainer, EpochOrderIsAPermutation) {
  const auto idx = epoch_order(1000, 9);
  std::set<std::uint32_t> s(idx.begin(), idx.end());
  EXPECT_EQ(s.size(), 1000u);
  EXPECT_EQ(*s.rbegin(), 999u);
  EXPECT_NE(idx, epoch_order(1000, 10));
}

TEST(Trainer, CpuEpochAndEvaluate) {
  Dataset d;
  d.name = "tiny", d.c = 1, d.h = 28, d.w = 28, d.classes = 10;
  d.images.resize(40 * 784);
  fill_uniform(d.images.data(), d.images.size(), 2);
  for (int i = 0; i < 40; ++i) {
    d.labels.push_back(i % 10);
    d.images[i * 784 + i % 10] += 5.f;  // a learnable marker per class
  }
  auto m = make_mlp();
  m->init(0);
  auto t = make_trainer(*m, default_optimizer("mlp"), TrainOptions{});
  double loss = 0;
  for (int e = 0; e < 30; ++e) loss = t->train_epoch(d, 7);  // 40 = 5 x 7 + a partial batch of 5
  EXPECT_LT(loss, 0.5);
  EXPECT_GT(t->evaluate(d, 16), 0.9);
  EXPECT_THROW(t->train_epoch(d, 0), UsageError);
  Dataset wrong = d;
  wrong.c = 3;
  EXPECT_THROW(t->train_epoch(wrong, 4), InputError);
}

TEST(Trainer, UnknownDeviceAndInputMode) {
  auto m = make_mlp();
  TrainOptions o;
  o.device = "tpu";
  EXPECT_THROW(make_trainer(*m, default_optimizer("mlp"), o), UsageError);
  EXPECT_THROW(parse_input_mode("teleport"), UsageError);
  EXPECT_EQ(parse_input_mode("prefetch"), InputMode::prefetch);
}

TEST(Trainer, CpuTrainerRefusesAutocastDtypes) {
  auto m = make_mlp();
  TrainOptions o;
  for (DType t : {DType::bf16, DType::fp16, DType::tf32}) {
    o.dtype = t;
    EXPECT_THROW(make_trainer(*m, default_optimizer("mlp"), o), UsageError) << dtype_name(t);
  }
  o.dtype = DType::fp32;
  EXPECT_NE(make_trainer(*m, default_optimizer("mlp"), o), nullptr);
}
