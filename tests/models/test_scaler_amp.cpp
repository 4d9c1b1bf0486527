// The dynamic loss scaler (models/amp.h) against torch.amp.GradScaler's state machine: defaults,
// inf/NaN -> step skipped + backoff + counter reset, 2000 finite steps -> growth, unscaling.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "models/amp.h"

using dlb::models::GradScaler;
using dlb::models::GradScalerConfig;

namespace {
// One training step with gradients g: unscale, maybe step, update. Returns whether it stepped.
bool step(GradScaler& s, std::vector<float> g, int* optimizer_steps) {
  s.unscale(g.data(), g.size());
  const bool stepped = s.should_step();
  if (stepped) ++*optimizer_steps;
  s.update();
  return stepped;
}
const float inf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();
}  // namespace

TEST(GradScaler, PyTorchDefaults) {
  GradScaler s;
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_EQ(s.config().growth_factor, 2.0f);
  EXPECT_EQ(s.config().backoff_factor, 0.5f);
  EXPECT_EQ(s.config().growth_interval, 2000);
  EXPECT_EQ(s.scale(0.25f), 16384.0f);
}

TEST(GradScaler, UnscaleDividesByTheScale) {
  GradScaler s;
  std::vector<float> g = {65536.0f, -131072.0f, 0.0f, 3.0f};
  EXPECT_TRUE(s.unscale(g.data(), g.size()));
  EXPECT_EQ(g[0], 1.0f);
  EXPECT_EQ(g[1], -2.0f);
  EXPECT_EQ(g[2], 0.0f);
  EXPECT_FLOAT_EQ(g[3], 3.0f / 65536.0f);
  EXPECT_FALSE(s.found_inf());
  EXPECT_TRUE(s.should_step());
}

TEST(GradScaler, InfOrNaNSkipsTheStepAndBacksOff) {
  GradScaler s;
  int opt = 0;
  EXPECT_FALSE(step(s, {1.0f, inf, 2.0f}, &opt));
  EXPECT_EQ(opt, 0);
  EXPECT_EQ(s.scale(), 32768.0f);
  EXPECT_FALSE(step(s, {kNaN}, &opt));
  EXPECT_EQ(s.scale(), 16384.0f);
  EXPECT_FALSE(step(s, {-inf}, &opt));
  EXPECT_EQ(s.scale(), 8192.0f);
  EXPECT_EQ(s.skipped_steps(), 3);
  EXPECT_TRUE(step(s, {1.0f}, &opt));  // a finite step after the overflow steps again
  EXPECT_EQ(opt, 1);
  EXPECT_EQ(s.scale(), 8192.0f);
  // an inf in any one of several tensors marks the whole step
  std::vector<float> a = {1.0f}, b = {inf};
  EXPECT_TRUE(s.unscale(a.data(), 1));
  EXPECT_FALSE(s.unscale(b.data(), 1));
  EXPECT_FALSE(s.should_step());
  s.update();
  EXPECT_EQ(s.scale(), 4096.0f);
  // a device-side check reports its flag instead
  s.record_found_inf(true);
  EXPECT_FALSE(s.should_step());
  s.update();
  EXPECT_EQ(s.scale(), 2048.0f);
}

TEST(GradScaler, GrowsAfter2000FiniteSteps) {
  GradScaler s;
  int opt = 0;
  for (int i = 0; i < 1999; ++i) ASSERT_TRUE(step(s, {0.5f}, &opt));
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_EQ(s.growth_tracker(), 1999);
  ASSERT_TRUE(step(s, {0.5f}, &opt));
  EXPECT_EQ(s.scale(), 131072.0f);
  EXPECT_EQ(s.growth_tracker(), 0);
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(step(s, {0.5f}, &opt));
  EXPECT_EQ(s.scale(), 262144.0f);
  EXPECT_EQ(opt, 4000);
}

TEST(GradScaler, OverflowResetsTheFiniteStepCounter) {
  GradScaler s;
  int opt = 0;
  for (int i = 0; i < 1500; ++i) step(s, {1.0f}, &opt);
  EXPECT_EQ(s.growth_tracker(), 1500);
  step(s, {inf}, &opt);
  EXPECT_EQ(s.growth_tracker(), 0);
  EXPECT_EQ(s.scale(), 32768.0f);
  for (int i = 0; i < 1999; ++i) step(s, {1.0f}, &opt);
  EXPECT_EQ(s.scale(), 32768.0f);  // 1500 + 1999 finite steps, but not 2000 in a row
  step(s, {1.0f}, &opt);
  EXPECT_EQ(s.scale(), 65536.0f);
}

TEST(GradScaler, CustomConfigAndDisabled) {
  GradScalerConfig c;
  c.init_scale = 8.0f, c.growth_interval = 3, c.growth_factor = 4.0f, c.backoff_factor = 0.25f;
  GradScaler s(c);
  int opt = 0;
  for (int i = 0; i < 3; ++i) step(s, {1.0f}, &opt);
  EXPECT_EQ(s.scale(), 32.0f);
  step(s, {inf}, &opt);
  EXPECT_EQ(s.scale(), 8.0f);
  // growth that would overflow fp32 is not applied
  GradScalerConfig big;
  big.init_scale = 3e38f, big.growth_interval = 1;
  GradScaler b(big);
  step(b, {1.0f}, &opt);
  EXPECT_EQ(b.scale(), 3e38f);
  // disabled (bf16/fp32 training): scale 1, grads untouched, every step taken
  GradScalerConfig off;
  off.enabled = false;
  GradScaler d(off);
  std::vector<float> g = {inf, 2.0f};
  d.unscale(g.data(), 2);
  EXPECT_EQ(g[1], 2.0f);
  EXPECT_EQ(d.scale(), 1.0f);
  EXPECT_TRUE(d.should_step());
  EXPECT_THROW(GradScaler(GradScalerConfig{0.0f}), std::invalid_argument);
}

// ---- the scaler inside a real training loop (AmpTrainer, fp16 emulated on the CPU) ----
#include "kernels/common/verify.h"
#include "models/net.h"

namespace {
struct Mlp {
  std::unique_ptr<dlb::models::Model> m = dlb::models::make_mlp();
  std::vector<float> x = std::vector<float>(8 * 784);
  std::vector<std::int32_t> y = std::vector<std::int32_t>(8);
  Mlp() {
    m->init(3);
    dlb::fill_uniform(x.data(), x.size(), 5);
    for (int i = 0; i < 8; ++i) y[i] = i % 10;
  }
  dlb::models::Batch batch() const { return {x.data(), y.data(), nullptr, 8}; }
};
}  // namespace

TEST(GradScalerTraining, Fp16OverflowSkipsTheStepAndLeavesWeightsAlone) {
  Mlp a;
  dlb::models::Optimizer opt(dlb::models::default_optimizer("mlp"), a.m->params());
  GradScalerConfig cfg;
  cfg.init_scale = 1e30f;  // scaled fp16 gradients overflow to inf
  dlb::models::AmpTrainer t(*a.m, opt, dlb::DType::fp16, cfg);
  const std::vector<float> w0 = a.m->params()[0]->value;
  t.step(a.batch());
  EXPECT_TRUE(t.last_step_skipped());
  EXPECT_EQ(a.m->params()[0]->value, w0);  // step skipped, masters untouched
  EXPECT_EQ(t.scaler().scale(), 5e29f);
  EXPECT_EQ(opt.steps(), 0);
  // it keeps backing off until the scaled gradients fit fp16, then trains
  int skipped = 1;
  for (int i = 0; i < 200 && t.last_step_skipped(); ++i, ++skipped) t.step(a.batch());
  EXPECT_FALSE(t.last_step_skipped());
  EXPECT_GT(skipped, 10);
  EXPECT_LT(t.scaler().scale(), 1e26f);
  EXPECT_NE(a.m->params()[0]->value, w0);
  EXPECT_EQ(opt.steps(), 1);
}

TEST(GradScalerTraining, Fp16WithTheDefaultScaleTracksFp32) {
  Mlp a, b;
  dlb::models::Optimizer oa(dlb::models::default_optimizer("mlp"), a.m->params());
  dlb::models::Optimizer ob(dlb::models::default_optimizer("mlp"), b.m->params());
  dlb::models::AmpTrainer t(*b.m, ob, dlb::DType::fp16);
  EXPECT_EQ(t.scaler().scale(), 65536.0f);
  for (int i = 0; i < 10; ++i) {
    const float lf = dlb::models::train_step(*a.m, oa, a.batch());
    const float lh = t.step(b.batch());
    ASSERT_FALSE(t.last_step_skipped()) << "step " << i;
    ASSERT_NEAR(lh, lf, 1e-2 * std::fabs(lf)) << "step " << i;
  }
  EXPECT_EQ(t.scaler().growth_tracker(), 10);
}
