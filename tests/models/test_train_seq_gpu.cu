// The CUDA sequence trainer (models/cuda/gpu_seq_trainer.h) against the CPU fp32 step: rnn, lstm
// (impl ours and cudnn) and transformer (dropout on and off, the causal mask) at small sizes, the
// same weights on the same batch -> the same loss and every gradient; then 10 Adam steps give the
// same losses. Under autocast of the GEMMs (tf32, bf16, fp16 with the loss scaler; impl ours) one
// step's loss and gradients against the CPU fp32 step within the dtype's tolerance
// (kernels/common/autocast_tolerance.h; fp16's gradients come back unscaled), and fp16's scaler on an
// overflow (the step skipped, the scale backed off, the next step a first step). Training steps
// replayed from a CUDA graph against the same steps run eagerly. Also what it refuses. Skipped without a CUDA device (passed on an H100, 2026-11-27).
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>

#include "kernels/common/autocast_tolerance.h"
#include "kernels/common/errors.h"
#include "kernels/common/verify.h"
#include "models/layers.h"
#include "models/seq_zoo.h"
#include "models/trainer.h"
#include "tests/gpu_test.h"
#include "tests/gpu_trainer_check.h"

using namespace dlb;
using namespace dlb::models;
using gputest::gpu;

namespace {

// Tolerances, fp32 on both sides (estimates: no GPU has run this yet). The GPU sums in other orders
// (cuBLAS's GEMM tiling, block-tree reductions, cuDNN's own RNN kernels) than OpenBLAS and our CPU
// kernels, so each value carries a few fp32 ulps (~1e-7 relative) per reduction level; through a
// step of ~10 layers the loss and each gradient tensor's relative L2 error should stay near 1e-6.
// 3e-5 and 1e-4 leave room, while a wrong or lost term (a missing residual path, a wrong dropout
// mask, a transposed weight) is off by 1e-2 or more.
constexpr double kLossTol = 3e-5;
constexpr double kGradL2Tol = 1e-4;
// Ten Adam steps: Adam divides each update by sqrt(v), so a gradient near zero whose rounding
// differs moves its weight by up to lr either way: the losses and weights drift apart a little each
// step. 1e-4 relative still catches a wrong update (a wrong step count or moment: 1e-2).
constexpr double kStepsLossTol = 1e-4;

struct SeqCase {
  std::string model, impl;
  float dropout;
  bool causal;
  std::string name() const {
    return model + "_" + impl + (dropout > 0 ? "_dropout" : "") + (causal ? "_causal" : "");
  }
};

void PrintTo(const SeqCase& c, std::ostream* os) { *os << c.name(); }

SeqConfig small(const SeqCase& k) {
  SeqConfig c = SeqConfig::defaults(k.model);
  c.vocab = 17, c.seq = 6, c.emb = 8, c.hidden = 12, c.classes = 4;
  c.d_model = 16, c.heads = 2, c.ff = 32, c.layers = k.model == "rnn" ? 1 : 2;
  c.dropout = k.dropout, c.causal = k.causal;
  c.impl = parse_rnn_impl(k.impl);
  return c;
}

// The CPU model (impl ours: the CPU has no cuDNN) and the GPU one with the same weights, `samples`
// windows of seeded tokens in order, and a trainer for each (the model's default optimizer: Adam).
struct Pair {
  SeqConfig c;
  std::unique_ptr<Model> cpu, dev;
  TokenData data;
  std::vector<std::uint32_t> order;
  std::unique_ptr<Trainer> tc, tg;
  Pair(const SeqCase& k, std::size_t samples, std::uint64_t seed, DType gemm = DType::fp32,
       const GradScalerConfig& scaler = {})
      : c(small(k)) {
    SeqConfig cc = c;
    cc.impl = RnnImpl::ours;
    cpu = make_seq_model(cc), dev = make_seq_model(c);
    cpu->init(3);
    dev->copy_params_from(*cpu);
    data = seq_data(c, "synthetic", samples, seed);
    for (std::uint32_t i = 0; i < data.size(); ++i) order.push_back(i);
    tc = make_trainer(*cpu, default_optimizer(k.model), TrainOptions{});
    TrainOptions o = gpu();
    o.dtype = gemm, o.scaler = scaler;
    tg = make_trainer(*dev, default_optimizer(k.model), o);
  }
};

class SeqGpuStep : public ::testing::TestWithParam<SeqCase> {};

TEST_P(SeqGpuStep, LossAndGradientsMatchTheCpuStep) {
  SKIP_WITHOUT_GPU();
  const SeqCase k = GetParam();
  Pair t(k, 8, 1);
  SeqBatcher batcher(t.c);
  const Batch& b = batcher.gather(t.data, t.order, 0, 4);
  const float want = t.tc->gradients(b);  // step 0: both draw step 0's dropout masks
  const float got = t.tg->gradients(b);
  EXPECT_NEAR(got, want, kLossTol * std::abs(want));
  gputest::expect_params_close(*t.dev, *t.cpu, gputest::Field::grad, kGradL2Tol);
  EXPECT_EQ(t.tg->describe().find("cuDNN") != std::string::npos, k.impl == "cudnn") << t.tg->describe();
  EXPECT_GE(t.tg->model_device_bytes(), t.cpu->num_params() * sizeof(float));
}

TEST_P(SeqGpuStep, TenAdamStepsGiveTheCpuLosses) {
  SKIP_WITHOUT_GPU();
  Pair t(GetParam(), 16, 2);
  SeqBatcher bc(t.c), bg(t.c);
  for (int s = 0; s < 10; ++s) {
    const std::size_t first = std::size_t(s % 3) * 4;  // batches of 4, a few distinct ones
    const float want = t.tc->train_batch(bc.gather(t.data, t.order, first, 4));
    const float got = t.tg->train_batch(bg.gather(t.data, t.order, first, 4));
    EXPECT_NEAR(got, want, kStepsLossTol * std::abs(want)) << "step " << s;
  }
  t.tg->sync_to_host();
  gputest::expect_params_close(*t.dev, *t.cpu, gputest::Field::value, kStepsLossTol);
}

INSTANTIATE_TEST_SUITE_P(SeqModels, SeqGpuStep,
                         ::testing::Values(SeqCase{"rnn", "ours", 0.f, false}, SeqCase{"rnn", "cudnn", 0.f, false},
                                           SeqCase{"lstm", "ours", 0.f, false}, SeqCase{"lstm", "cudnn", 0.f, false},
                                           SeqCase{"transformer", "ours", 0.f, false},
                                           SeqCase{"transformer", "ours", 0.1f, false},
                                           SeqCase{"transformer", "ours", 0.f, true},
                                           SeqCase{"transformer", "ours", 0.1f, true}),
                         [](const auto& i) { return i.param.name(); });

// The GEMMs autocast to tf32 / bf16 / fp16 (cuBLAS FAST_TF32 on the fp32 buffers; bf16 / fp16
// operands cast from them: cuda::gemm_f32): one step from the same weights on the same batch against
// the CPU's fp32 step, within the dtype's tolerance (the loss relative, each gradient tensor's
// relative L2 error). fp16 runs with the loss scaler (2^16): gradients() returns them unscaled, or
// they would be 65536x the CPU's.
struct AmpCase {
  SeqCase k;
  DType t;
};
void PrintTo(const AmpCase& a, std::ostream* os) { *os << a.k.name() << " " << dtype_name(a.t); }
class SeqGpuAutocast : public ::testing::TestWithParam<AmpCase> {};

TEST_P(SeqGpuAutocast, OneStepIsTheCpuFp32StepWithinTheDtypesTolerance) {
  SKIP_WITHOUT_GPU();
  const AmpCase a = GetParam();
  const StepTolerance tol = autocast_step_tolerance(a.t);
  Pair t(a.k, 8, 1, a.t);
  SeqBatcher batcher(t.c);
  const Batch& b = batcher.gather(t.data, t.order, 0, 4);
  const float want = t.tc->gradients(b);
  const float got = t.tg->gradients(b);
  EXPECT_NEAR(got, want, tol.loss * std::abs(want));
  gputest::expect_params_close(*t.dev, *t.cpu, gputest::Field::grad, tol.grad_l2);
  const char* compute = a.t == DType::tf32 ? "FAST_TF32" : a.t == DType::bf16 ? "CUDA_R_16BF operands" : "CUDA_R_16F operands";
  EXPECT_NE(t.tg->describe().find(compute), std::string::npos) << t.tg->describe();
  EXPECT_EQ(t.tg->describe().find("loss scaling") != std::string::npos, a.t == DType::fp16) << t.tg->describe();
  if (a.t == DType::fp16) EXPECT_EQ(t.tg->loss_scale(), 0x1p16f);  // a gradient-only call keeps the scale
}

INSTANTIATE_TEST_SUITE_P(SeqModels, SeqGpuAutocast,
                         ::testing::Values(AmpCase{{"rnn", "ours", 0.f, false}, DType::tf32},
                                           AmpCase{{"rnn", "ours", 0.f, false}, DType::bf16},
                                           AmpCase{{"lstm", "ours", 0.f, false}, DType::tf32},
                                           AmpCase{{"lstm", "ours", 0.f, false}, DType::bf16},
                                           AmpCase{{"transformer", "ours", 0.f, true}, DType::tf32},
                                           AmpCase{{"transformer", "ours", 0.1f, false}, DType::bf16},
                                           AmpCase{{"rnn", "ours", 0.f, false}, DType::fp16},
                                           AmpCase{{"lstm", "ours", 0.f, false}, DType::fp16},
                                           AmpCase{{"transformer", "ours", 0.1f, true}, DType::fp16}),
                         [](const auto& i) { return i.param.k.name() + "_" + dtype_name(i.param.t); });

// fp16's loss scaler on an overflow (tests/gpu_trainer_check.h says what and why): rnn (one
// recurrent GEMM chain), lstm, transformer; Adam's step count on the device. Dropout off: the two
// trainers compared step with different dropout step numbers.
class SeqGpuScaler : public ::testing::TestWithParam<SeqCase> {};

TEST_P(SeqGpuScaler, AnOverflowSkipsTheStepAndBacksOffTheScale) {
  SKIP_WITHOUT_GPU();
  const SeqCase k = GetParam();
  Pair d(k, 8, 4);  // the data and the batches
  SeqBatcher b0(d.c), b1(d.c);
  const Batch& x0 = b0.gather(d.data, d.order, 0, 4);
  const Batch& x1 = b1.gather(d.data, d.order, 4, 4);
  gputest::expect_overflow_skips_the_step(
      [&](const GradScalerConfig& cfg) {
        Pair p(k, 8, 4, DType::fp16, cfg);
        return gputest::Fp16Run{std::move(p.dev), std::move(p.tg)};
      },
      x0, x1);
}

INSTANTIATE_TEST_SUITE_P(SeqModels, SeqGpuScaler,
                         ::testing::Values(SeqCase{"rnn", "ours", 0.f, false}, SeqCase{"lstm", "ours", 0.f, false},
                                           SeqCase{"transformer", "ours", 0.f, true}),
                         [](const auto& i) { return i.param.name(); });

}  // namespace

TEST(SeqGpuTrainer, RefusesWhatItDoesNotRun) {
  SKIP_WITHOUT_GPU();
  auto m = make_seq_model(SeqConfig::defaults("lstm"));
  TrainOptions o = gpu();
  o.dtype = DType::fp64;
  EXPECT_THROW(make_trainer(*m, default_optimizer("lstm"), o), Unsupported);
  SeqConfig cc = SeqConfig::defaults("lstm");
  cc.impl = RnnImpl::cudnn;  // cuDNN's RNN stays fp32
  auto mc = make_seq_model(cc);
  for (const DType t : {DType::bf16, DType::fp16, DType::tf32}) {
    o.dtype = t;
    EXPECT_THROW(make_trainer(*mc, default_optimizer("lstm"), o), Unsupported) << dtype_name(t);
  }
  o = gpu();
  o.cuda_graph = true;  // (captures with fp32 or tf32 GEMMs only)
  o.dtype = DType::bf16;
  EXPECT_THROW(make_trainer(*m, default_optimizer("lstm"), o), Unsupported);
  OptimizerConfig rmsprop = default_optimizer("lstm");
  rmsprop.kind = "rmsprop";
  EXPECT_THROW(make_trainer(*m, rmsprop, gpu()), UsageError);
  // A layer without a twin in this trainer (Sigmoid: the image trainer's) in a sequence model.
  Model g("sigmoid", Shape{1, 4}, LossKind::cross_entropy, true);
  g.node<Embedding>({0}, "embedding", 8, 4);
  g.add<Sigmoid>();
  g.add<Linear>("fc", 4, 8);
  g.init(0);
  EXPECT_THROW(make_trainer(g, default_optimizer("lstm"), gpu()), Unsupported);
}

// TrainOptions::cuda_graph: a training step captured once per batch size and replayed gives the
// losses and weights of the same steps run eagerly (same kernels, same arguments: equal up to a
// cuBLAS algorithm chosen otherwise under capture), with batch sizes alternating (a graph each),
// and eager gradient and forward-only calls between (neither disturbs the graphs). The transformer
// runs the attention twins inside a capture, and with dropout each replayed step must draw that
// step's masks (the offset on the device) as the eager trainer draws them from the host's step
// count: a replay that repeated the captured step's masks would drift from step 1 on. Not yet run
// on a GPU.
TEST(SeqGpuTrainer, GraphTrainingStepsAreTheEagerSteps) {
  SKIP_WITHOUT_GPU();
  for (const SeqCase& k : {SeqCase{"rnn", "ours", 0.f, false}, SeqCase{"lstm", "ours", 0.f, false},
                           SeqCase{"transformer", "ours", 0.f, true}, SeqCase{"transformer", "ours", 0.1f, false},
                           SeqCase{"transformer", "ours", 0.1f, true}}) {
    SCOPED_TRACE(k.name());
    SeqConfig c = small(k);  // (SeqBatcher keeps a reference)
    auto eager = make_seq_model(c), graphed = make_seq_model(c);
    eager->init(5);
    graphed->copy_params_from(*eager);
    const TokenData data = seq_data(c, "synthetic", 16, 3);
    std::vector<std::uint32_t> order(data.size());
    for (std::uint32_t i = 0; i < data.size(); ++i) order[i] = i;
    TrainOptions o = gpu();
    auto te = make_trainer(*eager, default_optimizer(k.model), o);
    o.cuda_graph = true;
    auto tg = make_trainer(*graphed, default_optimizer(k.model), o);
    EXPECT_NE(tg->describe().find("training step in CUDA graphs"), std::string::npos) << tg->describe();
    SeqBatcher be(c), bg(c);
    const int sizes[] = {4, 4, 2, 4, 2, 2, 4};
    for (int s = 0; s < 7; ++s) {
      const std::size_t first = std::size_t(s % 3) * 4;
      const float want = te->train_batch(be.gather(data, order, first, sizes[s]));
      const float got = tg->train_batch(bg.gather(data, order, first, sizes[s]));
      // 1e-4 relative, as bench/graph_check.h: a cuBLAS algorithm chosen otherwise under capture
      // rounds otherwise, and Adam carries that into later losses (not measured yet); a replay that
      // repeated step 0's dropout masks would move a loss by ~1e-3 or more (estimated, dropout 0.1).
      const double tol = 1e-4 * std::abs(want);
      EXPECT_NEAR(got, want, tol) << "step " << s << ", batch " << sizes[s];
      if (s == 3) {  // eager calls between replays
        EXPECT_NEAR(tg->gradients(bg.gather(data, order, 0, 2)), te->gradients(be.gather(data, order, 0, 2)), tol);
        EXPECT_NEAR(tg->infer_batch(bg.gather(data, order, 4, 4)), te->infer_batch(be.gather(data, order, 4, 4)), tol);
      }
    }
    // Equal bits unless cuBLAS picks another algorithm under capture; Adam can turn that rounding into
    // a whole lr for a near-zero gradient's weight, hence relative L2 per tensor, as GpuTrain's graph test.
    te->sync_to_host(), tg->sync_to_host();
    gputest::expect_params_close(*graphed, *eager, gputest::Field::value, 1e-4);
  }
}

// What a captured training step cannot hold: cuDNN's RNN (its weight space refilled per step on the
// host's decision). The training call says so (Unsupported); the eager gradient call still runs.
TEST(SeqGpuTrainer, GraphTrainingRefusesCudnnRnn) {
  SKIP_WITHOUT_GPU();
  for (const SeqCase& k : {SeqCase{"rnn", "cudnn", 0.f, false}, SeqCase{"lstm", "cudnn", 0.f, false}}) {
    SCOPED_TRACE(k.name());
    SeqConfig c = small(k);  // (SeqBatcher keeps a reference)
    auto m = make_seq_model(c);
    m->init(1);
    const TokenData data = seq_data(c, "synthetic", 8, 1);
    std::vector<std::uint32_t> order(data.size());
    for (std::uint32_t i = 0; i < data.size(); ++i) order[i] = i;
    TrainOptions o = gpu();
    o.cuda_graph = true;
    auto t = make_trainer(*m, default_optimizer(k.model), o);
    EXPECT_EQ(t->describe().find("training step in CUDA graphs"), std::string::npos) << t->describe();
    SeqBatcher b(c);
    EXPECT_THROW(t->train_batch(b.gather(data, order, 0, 4)), Unsupported);
    EXPECT_TRUE(std::isfinite(t->gradients(b.gather(data, order, 0, 4))));
  }
}
