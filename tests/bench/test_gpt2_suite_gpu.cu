// Suite gpt2 (bench/gpt2.cpp) on a GPU: ours at the quick size (gpt-mini, batch 1, seq 32) in the
// CUDA sequence trainer, the fused attention core and the unfused one, sets up, verifies against the
// CPU fp32 step, runs AdamW steps and records its device memory; the same with its GEMMs autocast
// to tf32 and bf16 (--dtype). Also suite amp's sequence models (bench/amp.cpp) in the same trainer:
// rnn, lstm, transformer in fp32, tf32, bf16 verified against the CPU fp32 steps, fp16 refused (here,
// not in a binary of their own: each harness-linked *_gpu binary weighs ~3 MiB in the device bundle).
// Skipped without a CUDA device (and never run on one yet).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "bench/suite.h"
#include "kernels/common/errors.h"
#include "tests/gpu_test.h"

using namespace dlb;
using bench::json;

TEST(Gpt2SuiteGpu, OursVerifiesAndTrainsOnTheGpu) {
  SKIP_WITHOUT_GPU();
  const bench::Suite& s = *bench::find_suite("gpt2");
  bench::SuiteOptions o = s.options(true, json{{"attn", {"flash", "unfused"}}, {"dtype", {"fp32", "tf32", "bf16"}}});
  o.devices = {"cuda:0"};
  const auto cases = s.expand(o);
  ASSERT_EQ(cases.size(), 6u);  // the fused core and the unfused one, each in fp32, tf32, bf16
  for (const auto& spec : cases) {
    SCOPED_TRACE(spec.id.name());
    auto c = spec.make();
    c->setup();
    const auto v = c->verify();
    EXPECT_TRUE(v.ok) << v.message;
    for (int k = 0; k < 3; ++k) c->run();
    json r;
    c->annotate(r);
    EXPECT_TRUE(std::isfinite(r.at("loss").get<double>()));
    EXPECT_GT(r.at("peak_device_bytes").get<double>(), r.at("model_device_bytes").get<double>());
    const std::string trainer = r.at("trainer");
    EXPECT_NE(trainer.find("cuda"), std::string::npos);
    EXPECT_EQ(r.contains("autocast"), spec.id.dtype != "fp32");
    if (spec.id.dtype != "fp32") {
      EXPECT_NE(trainer.find(spec.id.dtype == "tf32" ? "FAST_TF32" : "FAST_16BF"), std::string::npos) << trainer;
    }
    c->teardown();
  }
}

TEST(SeqAmpGpu, SequenceModelsTrainInEachDtypeTheTrainerTakes) {
  SKIP_WITHOUT_GPU();
  const bench::Suite& s = *bench::find_suite("amp");
  for (const char* model : {"rnn", "lstm", "transformer"}) {
    bench::SuiteOptions o = s.options(true, {{"model", {model}}, {"batch", {2}}, {"dtype", {"fp32", "tf32", "bf16", "fp16"}},
                                             {"parity_steps", {3}}, {"size", json::array()}});
    o.devices = {"cuda:0"};
    int trained = 0;
    for (const auto& spec : s.expand(o)) {
      if (spec.id.op != "train") continue;
      SCOPED_TRACE(spec.id.name());
      auto c = spec.make();
      if (spec.id.dtype == "fp16") {
        EXPECT_THROW(c->setup(), Unsupported);
        continue;
      }
      c->setup();
      const auto v = c->verify();
      EXPECT_TRUE(v.ok) << v.message;
      c->run();
      EXPECT_EQ(c->metric(), bench::Metric::tokens_per_s);
      json e;
      c->annotate(e);
      EXPECT_EQ(e.at("parity_steps"), 3);
      EXPECT_EQ(e.contains("autocast"), spec.id.dtype != "fp32");
      if (spec.id.dtype == "bf16") {
        EXPECT_EQ(e.at("cublas_compute"), "CUBLAS_COMPUTE_32F_FAST_16BF");
      }
      c->teardown();
      ++trained;
    }
    EXPECT_EQ(trained, 3);  // fp32, tf32, bf16
  }
}
