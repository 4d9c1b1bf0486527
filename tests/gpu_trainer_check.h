// For the GPU trainers' tests against the CPU step (tests/models/test_train_*_gpu.cu): the device's
// TrainOptions, and each parameter of the GPU model against the CPU model's, gradients or values, by
// the relative L2 error of the tensor (sums with cancellation: single elements carry more rounding);
// and fp16's loss scaler on an overflow (expect_overflow_skips_the_step).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/verify.h"
#include "tests/attention_bias.h"
#include "models/model.h"
#include "models/trainer.h"

namespace gputest {

inline dlb::models::TrainOptions gpu() {
  dlb::models::TrainOptions o;
  o.device = "cuda:0";
  return o;
}

// After Adam steps the key block of each attention in-projection's bias (tests/attention_bias.h)
// differs between CPU and GPU: Adam divides its zero-but-for-rounding gradient by its own root mean
// square (+ eps 1e-8), which turns rounding into updates of a fraction of lr. After 10 steps the
// whole tensor read 0.016-0.099 (in_proj_bias) and 0.0017 (c_attn.bias) apart on an H100
// (2026-11-27), every other tensor within 1e-4. Values are compared without that block.
enum class Field { grad, value };
inline void expect_params_close(dlb::models::Model& got, dlb::models::Model& want, Field f, double tol) {
  const auto pg = got.params(), pw = want.params();
  ASSERT_EQ(pg.size(), pw.size());
  for (std::size_t i = 0; i < pw.size(); ++i) {
    dlb::L2Error e;
    if (f == Field::grad) {
      e.add(pg[i]->grad.data(), pw[i]->grad.data(), pw[i]->size());
    } else {
      std::vector<float> a, b;
      for (std::size_t j = 0; j < pw[i]->size(); ++j)
        if (!attnbias::is_key_bias_block(pw[i]->name, pw[i]->size(), j))
          a.push_back(pg[i]->value[j]), b.push_back(pw[i]->value[j]);
      e.add(a.data(), b.data(), a.size());
    }
    EXPECT_LT(e.rel(), tol) << pw[i]->name;
  }
}

// A GPU model and its trainer (fp16, the scaler's config given) made by a test from fixed weights.
struct Fp16Run {
  std::unique_ptr<dlb::models::Model> m;
  std::unique_ptr<dlb::models::Trainer> t;
};
using MakeFp16Run = std::function<Fp16Run(const dlb::models::GradScalerConfig&)>;

// fp16's GradScaler on the device (models/cuda/gpu_scaler.h) as PyTorch's acts: an init scale of
// 2^40 puts the logits' gradient (~2^40 / rows) past fp16's 65504 in the first backward GEMM's
// operands, so the gradients hold inf/NaN; the step is skipped (every weight as it was: no update,
// no decay) and the scale backs off (x2^-30 here, to 2^10, so the next call steps). That next step
// must be a first step (Adam's / AdamW's count and moments untouched by the skip): its update equals
// a fresh trainer's first step on the same batch (the same fp16 GEMMs, scales 2^10 vs 2^16: powers
// of two, exact but for subnormal operands: ~1e-4 apart), while a count advanced to 2 gives an
// update ~0.74x as large (26% off). A gradient-only call leaves the scale as it was.
inline void expect_overflow_skips_the_step(const MakeFp16Run& make, const dlb::models::Batch& b0,
                                           const dlb::models::Batch& b1) {
  dlb::models::GradScalerConfig huge;
  huge.init_scale = 0x1p40f, huge.backoff_factor = 0x1p-30f;
  Fp16Run a = make(huge);
  std::vector<std::vector<float>> init;
  for (const dlb::models::Param* p : a.m->params()) init.push_back(p->value);
  EXPECT_EQ(a.t->loss_scale(), 0x1p40f);
  a.t->gradients(b0);  // no step: the scale stays, the found_inf flag is cleared
  EXPECT_EQ(a.t->loss_scale(), 0x1p40f);
  EXPECT_TRUE(std::isfinite(a.t->train_batch(b0)));  // the loss is the forward's, unscaled
  EXPECT_EQ(a.t->loss_scale(), 0x1p10f);
  a.t->sync_to_host();
  const auto ps = a.m->params();
  for (std::size_t i = 0; i < ps.size(); ++i) EXPECT_EQ(ps[i]->value, init[i]) << ps[i]->name << ": stepped on an overflow";
  a.t->train_batch(b1);
  EXPECT_EQ(a.t->loss_scale(), 0x1p10f);  // a finite step: growth comes after growth_interval of them
  a.t->sync_to_host();
  Fp16Run f = make(dlb::models::GradScalerConfig{});
  f.t->train_batch(b1);
  f.t->sync_to_host();
  const auto pf = f.m->params();
  dlb::L2Error e;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    std::vector<float> da(ps[i]->size()), df(ps[i]->size());
    for (std::size_t j = 0; j < da.size(); ++j) da[j] = ps[i]->value[j] - init[i][j], df[j] = pf[i]->value[j] - init[i][j];
    e.add(da.data(), df.data(), da.size());
  }
  EXPECT_LT(e.rel(), 1e-2) << "the step after a skipped one is not a first step";
}

}  // namespace gputest
