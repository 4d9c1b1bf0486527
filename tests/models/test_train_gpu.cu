// The GPU training step against the CPU one: same weights, same batch -> same loss and gradients;
// every input pipeline and the CUDA-graph step train to the same loss; the memory counters see the
// model. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>

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

TrainOptions gpu(InputMode m = InputMode::pageable, bool graph = false) {
  TrainOptions o;
  o.device = "cuda:0", o.input = m, o.cuda_graph = graph;
  return o;
}

}  // namespace

class GpuStep : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuStep, GradientsMatchCpu) {
  SKIP_WITHOUT_GPU();
  const std::string name = GetParam();
  auto cpu = make_model(name), dev = make_model(name);
  cpu->init(5);
  dev->copy_params_from(*cpu);
  Shape in = cpu->input_shape(8);
  Dataset d = random_dataset(in, 8, 3, name == "autoencoder");
  const Batch b{d.images.data(), d.labels.data(), nullptr, 8};
  cpu->zero_grad();
  const float ref = cpu->forward_backward(b);
  auto t = make_trainer(*dev, default_optimizer(name), gpu());
  const float got = t->gradients(b);
  // 2e-4: cuDNN may run an fp32 conv as FFT/Winograd (CudnnConv2d::tolerance); TF32 would be ~1e-3.
  EXPECT_NEAR(got, ref, 2e-4 * std::abs(ref));
  auto pc = cpu->params(), pg = dev->params();
  for (std::size_t i = 0; i < pc.size(); ++i)
    EXPECT_LT(max_rel_err(pg[i]->grad.data(), pc[i]->grad.data(), pc[i]->size()), 2e-4) << pc[i]->name;
}

INSTANTIATE_TEST_SUITE_P(SeedModels, GpuStep, ::testing::Values("net128", "mlp", "convnet", "autoencoder"));

TEST(GpuTrain, InputModesAndGraphAgreeWithCpuEpoch) {
  SKIP_WITHOUT_GPU();
  auto base = make_net(16);
  base->init(1);
  Dataset d = random_dataset(base->input_shape(1), 100, 4);  // 100 = 6 x 16 + a partial batch of 4
  auto cpu = make_net(16);
  cpu->copy_params_from(*base);
  auto tc = make_trainer(*cpu, default_optimizer("net128"), TrainOptions{});
  const double ref = tc->train_epoch(d, 16);
  for (InputMode m : {InputMode::pageable, InputMode::pinned, InputMode::prefetch, InputMode::resident})
    for (bool graph : {false, true}) {
      auto g = make_net(16);
      g->copy_params_from(*base);
      auto t = make_trainer(*g, default_optimizer("net128"), gpu(m, graph));
      const double loss = t->train_epoch(d, 16);
      EXPECT_NEAR(loss, ref, 1e-4 * std::abs(ref)) << input_mode_name(m) << (graph ? " graph" : "");
      t->sync_to_host();
      auto a = g->params(), r = cpu->params();
      for (std::size_t i = 0; i < a.size(); ++i)
        EXPECT_LT(max_rel_err(a[i]->value.data(), r[i]->value.data(), a[i]->size()), 1e-4) << a[i]->name;
    }
}

TEST(GpuTrain, MemoryCountersSeeTheModel) {
  SKIP_WITHOUT_GPU();
  auto m = make_net(128);
  m->init(0);
  auto t = make_trainer(*m, default_optimizer("net128"), gpu());
  EXPECT_GE(t->model_device_bytes(), 120078u * 4);
  EXPECT_LT(t->model_device_bytes(), 120078u * 4 + 64 * 1024);
  Dataset d = random_dataset(m->input_shape(1), 128, 2);
  t->train_epoch(d, 64);
  EXPECT_GT(t->peak_device_bytes(), t->model_device_bytes() * 2);  // grads, momentum, activations
  EXPECT_GT(t->evaluate(d, 64), 0.0);
}

TEST(GpuTrain, PrepareChangesNoResultAndPartialBatchesReusePlans) {
  SKIP_WITHOUT_GPU();
  auto base = make_net(16);
  base->init(7);
  Dataset d = random_dataset(base->input_shape(1), 50, 5);  // 3 x 16 + a partial batch of 2
  for (InputMode m : {InputMode::pageable, InputMode::resident})
    for (bool graph : {false, true}) {
      double loss[2][2];
      std::vector<std::vector<float>> after[2];
      for (int prepared = 0; prepared < 2; ++prepared) {
        auto g = make_net(16);
        g->copy_params_from(*base);
        auto t = make_trainer(*g, default_optimizer("net128"), gpu(m, graph));
        if (prepared) t->prepare(d, 16);
        // Two epochs: the second runs on plans (and graphs) kept from the first, partial batch included.
        loss[prepared][0] = t->train_epoch(d, 16);
        loss[prepared][1] = t->train_epoch(d, 16);
        t->sync_to_host();
        for (Param* p : g->params()) after[prepared].push_back(p->value);
      }
      for (int e = 0; e < 2; ++e)
        EXPECT_NEAR(loss[1][e], loss[0][e], 1e-5 * std::abs(loss[0][e])) << input_mode_name(m) << " graph " << graph;
      for (std::size_t i = 0; i < after[0].size(); ++i)
        EXPECT_LT(max_rel_err(after[1][i].data(), after[0][i].data(), after[0][i].size()), 1e-5) << i;
    }
}
