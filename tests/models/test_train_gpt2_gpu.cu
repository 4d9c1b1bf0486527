// GPT-2 on the GPU (the CUDA sequence trainer, models/cuda/gpu_seq_trainer.h) against the CPU fp32
// step: each of GPT-2's device twins against its CPU layer (GELU, the learned positions, the tied LM
// head, the causal attention core, flash and unfused), then a small gpt2 (L 2, H 2, C 64, V 100
// padded to 128, T 16, B 2) from the same weights on the same batch: the loss and every gradient,
// and 10 AdamW steps' losses and weights; with the GEMMs autocast to tf32 / bf16 / fp16 (the loss
// scaler), one step within the dtype's tolerance (kernels/common/autocast_tolerance.h), and fp16's
// scaler on an overflow with AdamW (the step and its decay skipped, the count not advanced). Also
// what the trainer refuses. Skipped without a CUDA device (passed on an H100, 2026-11-27).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/autocast_tolerance.h"
#include "kernels/common/errors.h"
#include "kernels/common/verify.h"
#include "kernels/cuda/cuda_util.h"
#include "models/cuda/gpu_seq_layers.h"
#include "models/gpt2.h"
#include "models/layers.h"
#include "models/trainer.h"
#include "tests/gpu_test.h"
#include "tests/gpu_trainer_check.h"
#include "tests/seq_test_util.h"

using namespace dlb;
using namespace dlb::models;
using gputest::gpu;

namespace {

// One layer: its twin against its own fp32 path. The same arithmetic summed in other orders (cuBLAS
// tiles, warp trees, tanhf against the CPU's tanh): a few fp32 ulps of each tensor's scale, ~1e-6;
// fp32's 1e-5 is the suite's tolerance, and a wrong term (a transposed weight, a missing position,
// an unmasked key) is off by 1e-2 and more.
const double kTwinTol = default_tolerance(DType::fp32);
// The whole step (as tests/models/test_train_seq_gpu.cu, and why): the loss relative, each gradient
// tensor's relative L2 error; ten AdamW steps drift a little further (Adam's sqrt(v) divides a
// near-zero gradient's rounding).
constexpr double kLossTol = 3e-5;
constexpr double kGradL2Tol = 1e-4;
constexpr double kStepsTol = 1e-4;

std::vector<float> download(const cuda::DeviceBuffer<float>& b) {
  DLB_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> h(b.size());
  b.download(h.data(), h.size());
  return h;
}
cuda::DeviceBuffer<float> upload(const std::vector<float>& h) {
  cuda::DeviceBuffer<float> b(h.size());
  b.upload(h.data(), h.size());
  return b;
}

// The errors of a twin against its layer: forward output, input gradient, each parameter gradient.
struct TwinErrors {
  double y = 0, dx = 0, dparams = 0;
};

// `l` (one float input of shape `in`) on the CPU and as its device twin, the same x, dy and weights.
// CPU layers add into zeroed Param::grad; the twins overwrite (or add into the trainer's zeroed
// gradient): both start from zero here.
TwinErrors compare_twin(Layer& l, const Shape& in, std::uint64_t seed, float scale = 1.f) {
  const Shape out = l.out_shape(in);
  const std::vector<float> x = seqtest::rand_f(in.size(), seed, scale), dy = seqtest::rand_f(out.size(), seed + 1);
  std::vector<float> y(out.size()), dx(in.size());
  for (Param* p : l.params()) std::fill(p->grad.begin(), p->grad.end(), 0.f);
  const void* xs[1] = {x.data()};
  float* dxs[1] = {dx.data()};
  l.forward(Fwd<float>{Shapes(in), xs, y.data()});
  l.backward(Bwd<float>{Shapes(in), xs, y.data(), dy.data(), dxs});

  gpu_seq::DeviceParams dp;
  std::size_t total = 0;
  for (Param* p : l.params()) dp.offset[p] = total, total += p->size();
  cuda::DeviceBuffer<float> values(std::max<std::size_t>(total, 1)), grads(values.size());
  for (Param* p : l.params())
    DLB_CUDA_CHECK(cudaMemcpy(values.data() + dp.offset[p], p->value.data(), p->size() * sizeof(float),
                              cudaMemcpyHostToDevice));
  DLB_CUDA_CHECK(cudaMemset(grads.data(), 0, grads.bytes()));
  dp.values = values.data(), dp.grads = grads.data();
  cuda::Stream s;
  auto ops = gpu_seq::make_node_ops(l, {in}, dp, s.get());
  const auto xd = upload(x), dyd = upload(dy);
  cuda::DeviceBuffer<float> yd(out.size()), dxd(in.size());
  const void* xsd[1] = {xd.data()};
  float* dxsd[1] = {dxd.data()};
  ops->forward(gpu_seq::NodeIo{Shapes(in), xsd, yd.data()});
  ops->backward(gpu_seq::NodeIo{Shapes(in), xsd, yd.data(), dyd.data(), dxsd});
  DLB_CUDA_CHECK(cudaStreamSynchronize(s.get()));

  TwinErrors e;
  e.y = max_rel_err(download(yd).data(), y.data(), y.size());
  e.dx = max_rel_err(download(dxd).data(), dx.data(), dx.size());
  const std::vector<float> g = download(grads);
  for (Param* p : l.params())
    e.dparams = std::max(e.dparams, max_rel_err(g.data() + dp.offset[p], p->grad.data(), p->size()));
  return e;
}

void expect_close(const TwinErrors& e, bool params) {
  EXPECT_LT(e.y, kTwinTol);
  EXPECT_LT(e.dx, kTwinTol);
  if (params) EXPECT_LT(e.dparams, kTwinTol);
}

TEST(Gpt2Twins, GeluMatchesTheCpuLayer) {
  SKIP_WITHOUT_GPU();
  GELU g;
  expect_close(compare_twin(g, Shape{2, 16, 256}, 1, 4.f), false);  // x in [-4, 4]: both tails and the bend
}

TEST(Gpt2Twins, PositionEmbeddingMatchesTheCpuLayer) {
  SKIP_WITHOUT_GPU();
  PositionEmbedding wpe("wpe", 32, 64);  // T 16 of 32 positions: rows 16.. get no gradient
  wpe.init(2);
  expect_close(compare_twin(wpe, Shape{3, 16, 64}, 3), true);
}

TEST(Gpt2Twins, TiedLmHeadMatchesTheCpuLayer) {
  SKIP_WITHOUT_GPU();
  Embedding wte("wte", 128, 64);  // V 100 of 128 rows: the padded rows' logits are not made, their gradient stays 0
  wte.init(4);
  TiedLMHead head(&wte, 100);
  expect_close(compare_twin(head, Shape{2, 16, 64}, 5), true);
}

// The core alone (GPT-2's: packed QKV in, heads out): flash (the causal default), unfused, and the
// full (non-causal) mask; T 37 crosses the kernels' 32-row tiles, D 32.
TEST(Gpt2Twins, AttentionCoreMatchesTheCpuLayer) {
  SKIP_WITHOUT_GPU();
  for (const bool causal : {true, false})
    for (const char* algo : {"flash", "unfused"}) {
      SCOPED_TRACE(std::string(algo) + (causal ? " causal" : " full"));
      MultiheadAttention::Options o;
      o.causal = causal, o.projections = false;
      MultiheadAttention attn("attn", 64, 2, o);
      attn.algo = algo;
      expect_close(compare_twin(attn, Shape{2, 37, 3 * 64}, 6), false);
    }
}

Gpt2Config small() {
  Gpt2Config c;
  c.name = "small", c.max_seq_len = 32, c.vocab_size = 100, c.padded_vocab_size = 128, c.num_layers = 2;
  c.num_heads = 2, c.channels = 64;
  return c;
}

// The CPU model and the GPU one from the same weights, a trainer each, batches of B 2 x T 16.
struct Pair {
  std::unique_ptr<Model> cpu, dev;
  std::unique_ptr<Trainer> tc, tg;
  explicit Pair(const OptimizerConfig& opt, DType gemm = DType::fp32, const GradScalerConfig& scaler = {}) {
    const Gpt2Weights w = gpt2_random_weights(small(), 7);
    cpu = make_gpt2(w, 16), dev = make_gpt2(w, 16);
    tc = make_trainer(*cpu, opt, TrainOptions{});
    TrainOptions o = gpu();
    o.dtype = gemm, o.scaler = scaler;
    tg = make_trainer(*dev, opt, o);
  }
};

TEST(Gpt2GpuStep, LossAndEveryGradientMatchTheCpuStep) {
  SKIP_WITHOUT_GPU();
  Pair t(gpt2_optimizer());
  Gpt2Batcher b(gpt2_random_tokens(2 * 16 + 1, small().vocab_size, 8), 2, 16);
  const Batch& batch = b.next();
  const float want = t.tc->gradients(batch);
  const float got = t.tg->gradients(batch);
  EXPECT_NEAR(got, want, kLossTol * std::abs(want));
  EXPECT_NEAR(want, std::log(100.0), 0.2);  // GPT-2's init: near-uniform predictions
  gputest::expect_params_close(*t.dev, *t.cpu, gputest::Field::grad, kGradL2Tol);
  // wte's gradient is the sum of the embedding's and the tied head's: its padded rows stay zero
  const Param& wte = gpt2_param(*t.dev, kWte, 0);
  for (std::size_t i = std::size_t(small().vocab_size) * small().channels; i < wte.size(); ++i)
    ASSERT_EQ(wte.grad[i], 0.f) << i;
  EXPECT_GE(t.tg->model_device_bytes(), t.cpu->num_params() * sizeof(float));
}

// The GEMMs (the blocks' Linear layers, the tied head) autocast: the loss and every gradient within
// the dtype's tolerance of the CPU fp32 step's (fp16: scaled by 2^16 in backward, returned unscaled).
TEST(Gpt2GpuStep, AutocastStepIsTheCpuFp32StepWithinTheDtypesTolerance) {
  SKIP_WITHOUT_GPU();
  for (const DType t : {DType::tf32, DType::bf16, DType::fp16}) {
    SCOPED_TRACE(dtype_name(t));
    const StepTolerance tol = autocast_step_tolerance(t);
    Pair p(gpt2_optimizer(), t);
    Gpt2Batcher b(gpt2_random_tokens(2 * 16 + 1, small().vocab_size, 8), 2, 16);
    const Batch& batch = b.next();
    const float want = p.tc->gradients(batch);
    const float got = p.tg->gradients(batch);
    EXPECT_NEAR(got, want, tol.loss * std::abs(want));
    gputest::expect_params_close(*p.dev, *p.cpu, gputest::Field::grad, tol.grad_l2);
  }
}

// fp16's scaler on an overflow with AdamW and decay (tests/gpu_trainer_check.h says what and why):
// the skipped step leaves every weight as it was (the decay too), the next is AdamW's first.
TEST(Gpt2GpuStep, Fp16OverflowSkipsTheAdamWStep) {
  SKIP_WITHOUT_GPU();
  OptimizerConfig opt = gpt2_optimizer();
  opt.lr = 1e-3f, opt.weight_decay = 0.1f;
  const auto tokens = gpt2_random_tokens(2 * 2 * 16 + 1, small().vocab_size, 9);
  Gpt2Batcher b0(tokens, 2, 16), b1(tokens, 2, 16);
  const Batch& x0 = b0.next();
  b1.next();
  const Batch& x1 = b1.next();
  gputest::expect_overflow_skips_the_step(
      [&](const GradScalerConfig& cfg) {
        Pair p(opt, DType::fp16, cfg);
        return gputest::Fp16Run{std::move(p.dev), std::move(p.tg)};
      },
      x0, x1);
}

// AdamW with decay (GPT-2's optimizer at lr 1e-3, decay 0.1: the decay's term counts), batches of the
// stream in llm.c's order.
TEST(Gpt2GpuStep, TenAdamWStepsGiveTheCpuLosses) {
  SKIP_WITHOUT_GPU();
  OptimizerConfig opt = gpt2_optimizer();
  opt.lr = 1e-3f, opt.weight_decay = 0.1f;
  Pair t(opt);
  const auto tokens = gpt2_random_tokens(3 * 2 * 16 + 1, small().vocab_size, 9);
  Gpt2Batcher bc(tokens, 2, 16), bg(tokens, 2, 16);
  float first = 0, last = 0;
  for (int s = 0; s < 10; ++s) {
    const float want = t.tc->train_batch(bc.next());
    const float got = t.tg->train_batch(bg.next());
    EXPECT_NEAR(got, want, kStepsTol * std::abs(want)) << "step " << s;
    if (s == 0) first = got;
    last = got;
  }
  EXPECT_LT(last, first);  // three batches seen three times over: the loss falls
  t.tg->sync_to_host();
  gputest::expect_params_close(*t.dev, *t.cpu, gputest::Field::value, kStepsTol);
}

// --checkpoint-activations: each block recomputed in backward gives the same step (the same kernels
// on the same inputs: the same bits, but for cuBLAS's choice between two calls) and holds less: one
// block's inner values instead of both blocks'.
TEST(Gpt2GpuStep, CheckpointingGivesTheSameStepInLessMemory) {
  SKIP_WITHOUT_GPU();
  const Gpt2Weights w = gpt2_random_weights(small(), 7);
  Gpt2Batcher b(gpt2_random_tokens(2 * 16 + 1, small().vocab_size, 8), 2, 16);
  const Batch& batch = b.next();
  auto kept = make_gpt2(w, 16), ckpt = make_gpt2(w, 16);
  ckpt->set_checkpointing(true);
  auto tk = make_trainer(*kept, gpt2_optimizer(), gpu());
  const float want = tk->gradients(batch);
  const std::size_t peak_kept = tk->peak_device_bytes();
  tk.reset();
  auto tc = make_trainer(*ckpt, gpt2_optimizer(), gpu());
  const float got = tc->gradients(batch);
  EXPECT_NEAR(got, want, 1e-6 * std::abs(want));
  gputest::expect_params_close(*ckpt, *kept, gputest::Field::grad, 1e-6);
  EXPECT_LT(tc->peak_device_bytes(), peak_kept);
  // and it trains: two AdamW steps' losses as the CPU's checkpointed steps give them
  auto cpu = make_gpt2(w, 16);
  cpu->set_checkpointing(true);
  auto tcpu = make_trainer(*cpu, gpt2_optimizer(), TrainOptions{});
  for (int s = 0; s < 2; ++s) {
    const float l_cpu = tcpu->train_batch(batch), l_gpu = tc->train_batch(batch);
    EXPECT_NEAR(l_gpu, l_cpu, kStepsTol * std::abs(l_cpu)) << "step " << s;
  }
}

// --profile on a GPU: profile_gradients gives gradients()'s loss and gradients, with a region by CUDA
// events per layer and direction, and (checkpointed) a recompute region per dropped node.
TEST(Gpt2GpuStep, ProfiledGradientsAreTheStepsWithARegionPerLayer) {
  SKIP_WITHOUT_GPU();
  const Gpt2Weights w = gpt2_random_weights(small(), 7);
  Gpt2Batcher b(gpt2_random_tokens(2 * 16 + 1, small().vocab_size, 8), 2, 16);
  const Batch& batch = b.next();
  auto m = make_gpt2(w, 16);
  m->set_checkpointing(true);
  auto t = make_trainer(*m, gpt2_optimizer(), gpu());
  const float want = t->gradients(batch);
  std::vector<std::vector<float>> grads;
  for (Param* p : m->params()) grads.push_back(p->grad);
  auto prof = make_cuda_profiler("test");
  const float got = t->profile_gradients(batch, *prof);
  EXPECT_NEAR(got, want, 1e-6 * std::abs(want));
  const auto ps = m->params();
  for (std::size_t i = 0; i < ps.size(); ++i) EXPECT_LT(max_rel_err(ps[i]->grad.data(), grads[i].data(), ps[i]->size()), 1e-5) << ps[i]->name;
  int fwd = 0, bwd = 0, again = 0, loss = 0;
  for (const Region& r : prof->regions()) {
    fwd += r.name.rfind("forward ", 0) == 0;
    bwd += r.name.rfind("backward ", 0) == 0;
    again += r.name.rfind("recompute ", 0) == 0;
    loss += r.name == "loss";
    EXPECT_GE(r.dur_us, 0.0) << r.name;
    EXPECT_EQ(r.clock, "cuda_event") << r.name;
  }
  const int nodes = int(m->nodes().size());
  EXPECT_EQ(fwd, nodes);
  EXPECT_EQ(bwd, nodes);
  EXPECT_EQ(again, small().num_layers * 9);  // of each block's 10 nodes, all but the last
  EXPECT_EQ(loss, 1);
}

TEST(Gpt2GpuStep, RefusesWhatItDoesNotRun) {
  SKIP_WITHOUT_GPU();
  auto m = make_gpt2(gpt2_random_weights(small(), 1), 16);
  TrainOptions o = gpu();
  o.dtype = DType::fp64;
  EXPECT_THROW(make_trainer(*m, gpt2_optimizer(), o), Unsupported);
  // a token past the padded table, a label past the real vocabulary: refused before the device reads them
  auto t = make_trainer(*m, gpt2_optimizer(), gpu());
  std::vector<std::int32_t> x(16, 1), y(16, 1);
  const void* in[1] = {x.data()};
  Batch b;
  b.n = 1, b.inputs = in, b.labels = y.data();
  y[3] = 100;
  EXPECT_THROW(t->train_batch(b), InputError);
  y[3] = 1, x[5] = 128;
  EXPECT_THROW(t->train_batch(b), InputError);
}

}  // namespace
