// The GPU trainers' forward-only call (Trainer::infer_batch, models/trainer.h) against the CPU fp32
// eval-mode forward (models::forward_loss) from the same weights on the same batch, for every model
// of the zoo at small sizes (rnn and lstm with impl ours and cudnn, the transformer with dropout on:
// eval mode must turn it off) at batch 1 and 3: the same loss, a second call the same loss, the
// device weights untouched; then a training step in between (the cuDNN weight spaces are refreshed
// per optimizer step) and the losses still agree. Skipped without a CUDA device (never run on one yet).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <numeric>
#include <ostream>
#include <string>

#include "models/net.h"
#include "models/seq_zoo.h"
#include "models/trainer.h"
#include "tests/gpu_test.h"
#include "tests/gpu_trainer_check.h"
#include "tests/train_test_data.h"

using namespace dlb;
using namespace dlb::models;
using gputest::gpu;

namespace {

// fp32 on both sides: one loss out of up to ~10 layers summed in other orders agrees to ~1e-6; an
// FFT or Winograd convolution cuDNN may pick for the image models rounds up to ~1e-4 of the scale
// (as bench/seq_infer.cpp's check). A dropout left on or a wrong layer is off by a percent or more.
// The same after one step on each side (Adam moves a weight whose near-zero gradient rounds to the
// other sign by lr either way: ~1e-5 of the loss at these sizes, tests/models/test_train_seq_gpu.cu).
constexpr double kLossTol = 2e-4;

struct InferModel {
  std::string model, impl;
  std::string name() const { return model + (impl.empty() ? "" : "_" + impl); }
};
void PrintTo(const InferModel& c, std::ostream* os) { *os << c.name(); }

SeqConfig small(const InferModel& k, RnnImpl impl) {
  SeqConfig c = SeqConfig::defaults(k.model);
  c.vocab = 17, c.seq = 6, c.emb = 8, c.hidden = 12, c.classes = 4;
  c.d_model = 16, c.heads = 2, c.ff = 32, c.layers = k.model == "rnn" ? 1 : 2;
  c.dropout = 0.1f;  // the transformer's: off in eval mode
  c.impl = impl;
  return c;
}

// The CPU model (impl ours: the CPU has no cuDNN) and the GPU one with the same weights, a CPU and
// a GPU trainer, and a batch of each size from the same data.
struct Pair {
  bool seq;
  SeqConfig c;
  std::unique_ptr<Model> cpu, dev;
  std::unique_ptr<Trainer> tc, tg;
  TokenData tokens;
  Dataset images;
  std::vector<std::uint32_t> order;
  SeqBatcher b1, b3;
  explicit Pair(const InferModel& k)
      : seq(is_seq_model(k.model)), c(small(k, seq ? parse_rnn_impl(k.impl.empty() ? "ours" : k.impl) : RnnImpl::ours)),
        b1(c), b3(c) {
    if (seq) {
      SeqConfig cc = c;
      cc.impl = RnnImpl::ours;
      cpu = make_seq_model(cc), dev = make_seq_model(c);
      tokens = seq_data(c, "synthetic", 8, 1);
      order.resize(tokens.size());
      std::iota(order.begin(), order.end(), 0u);
    } else {
      cpu = make_model(k.model), dev = make_model(k.model);
      images = test::random_dataset(cpu->input_shape(1), 8, 3, k.model == "autoencoder");
    }
    cpu->init(3);
    dev->copy_params_from(*cpu);
    tc = make_trainer(*cpu, default_optimizer(k.model), TrainOptions{});
    tg = make_trainer(*dev, default_optimizer(k.model), gpu());
  }
  Batch batch(int n) {
    if (seq) return (n == 1 ? b1 : b3).gather(tokens, order, 0, n);
    return Batch{images.images.data(), images.labels.data(), nullptr, n};
  }
};

class GpuInfer : public ::testing::TestWithParam<InferModel> {};

TEST_P(GpuInfer, LossIsTheCpuForwardsAndWeightsStay) {
  SKIP_WITHOUT_GPU();
  Pair t(GetParam());
  for (int n : {1, 3}) {
    SCOPED_TRACE("batch " + std::to_string(n));
    const Batch b = t.batch(n);
    const float want = forward_loss(*t.cpu, b);
    const float got = t.tg->infer_batch(b);
    EXPECT_NEAR(got, want, kLossTol * std::abs(want));
    EXPECT_FLOAT_EQ(t.tg->infer_batch(b), got);  // no state carried from the first call
  }
  t.tg->sync_to_host();  // the device's weights, bit for bit the uploaded ones: no step, no write
  const auto pd = t.dev->params(), pc = t.cpu->params();
  for (std::size_t i = 0; i < pc.size(); ++i) EXPECT_EQ(pd[i]->value, pc[i]->value) << pc[i]->name;
  EXPECT_GT(t.tg->peak_device_bytes(), t.tg->model_device_bytes());
}

TEST_P(GpuInfer, AfterATrainingStepTheLossesStillAgree) {
  SKIP_WITHOUT_GPU();
  Pair t(GetParam());
  const Batch b1 = t.batch(1);
  t.tg->infer_batch(b1);  // batch 1's plan, its cuDNN weight space filled at step 0
  const Batch b3 = t.batch(3);
  const float lc = t.tc->train_batch(b3), lg = t.tg->train_batch(b3);
  EXPECT_NEAR(lg, lc, kLossTol * std::abs(lc));
  const float want = forward_loss(*t.cpu, b1), got = t.tg->infer_batch(b1);  // step 1's weights
  EXPECT_NEAR(got, want, kLossTol * std::abs(want));
}

INSTANTIATE_TEST_SUITE_P(Zoo, GpuInfer,
                         ::testing::Values(InferModel{"rnn", "ours"}, InferModel{"rnn", "cudnn"},
                                           InferModel{"lstm", "ours"}, InferModel{"lstm", "cudnn"},
                                           InferModel{"transformer", "ours"}, InferModel{"net128", ""},
                                           InferModel{"mlp", ""}, InferModel{"convnet", ""},
                                           InferModel{"autoencoder", ""}),
                         [](const auto& i) { return i.param.name(); });

}  // namespace
