// Suite gpt2 (bench/gpt2.cpp) on a GPU: ours at the quick size (gpt-mini, batch 1, seq 32) in the
// CUDA sequence trainer, the fused attention core and the unfused one, with and without activation
// checkpointing, sets up, verifies against the CPU fp32 step, runs AdamW steps and records its device
// memory; the same with its GEMMs autocast to tf32, bf16 and fp16 (--dtype; fp16 with the loss
// scaler); its op=infer cases (the K/V-cache decoder) verify and time. Also suite amp's sequence
// models (bench/amp.cpp) in the same trainer: rnn, lstm, transformer in fp32, tf32, bf16, fp16
// verified against the CPU fp32 steps (here, not in a binary of their own: each harness-linked *_gpu
// binary weighs ~3 MiB in the device bundle). Skipped without a CUDA device (passed on an H100, 2026-11-27).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "bench/suite.h"
#include "kernels/common/errors.h"
#include "tests/bench/seq_amp_cases.h"
#include "tests/gpu_test.h"

using namespace dlb;
using bench::json;

namespace {
// The quick gpt2 cases on cuda:0 with `axes` set; each set up, verified, run 3 times and annotated
// into `r` before `check(r)` and its teardown.
void run_quick_cases(const json& axes, std::size_t want, const std::function<void(const json&)>& check) {
  const bench::Suite& s = *bench::find_suite("gpt2");
  bench::SuiteOptions o = s.options(true, axes);
  o.devices = {"cuda:0"};
  const auto cases = s.expand(o);
  ASSERT_EQ(cases.size(), want);
  for (const auto& spec : cases) {
    SCOPED_TRACE(spec.id.name());
    auto c = spec.make();
    c->setup();
    const auto v = c->verify();
    EXPECT_TRUE(v.ok) << v.message;
    for (int k = 0; k < 3; ++k) EXPECT_GE(c->run(), 0.0);
    json r;
    c->annotate(r);
    check(r);
    c->teardown();
  }
}
}  // namespace

TEST(Gpt2SuiteGpu, OursVerifiesAndTrainsOnTheGpu) {
  SKIP_WITHOUT_GPU();
  // the fused core and the unfused one, each with every activation kept and with each block recomputed
  run_quick_cases(json{{"attn", {"flash", "unfused"}}, {"ckpt", {"off", "on"}}}, 4, [](const json& r) {
    EXPECT_TRUE(std::isfinite(r.at("loss").get<double>()));
    EXPECT_GT(r.at("peak_device_bytes").get<double>(), r.at("model_device_bytes").get<double>());
    EXPECT_NE(r.at("trainer").get<std::string>().find("cuda"), std::string::npos);
  });
}

// op=infer on the GPU: our K/V-cache decoder's prefill and decode cases verify (every position's
// logits against the CPU's full forward) and time calls with a latency each.
TEST(Gpt2SuiteGpu, OursDecodesOnTheGpu) {
  SKIP_WITHOUT_GPU();
  run_quick_cases(json{{"op", {"infer"}}}, 2, [](const json& r) {  // prefill, decode
    EXPECT_GT(r.at("cache_bytes").get<double>(), 0.0);
    EXPECT_GT(r.at("p50_ms").get<double>(), 0.0);
  });
}

// --dtype tf32,bf16,fp16: the trainer's GEMMs autocast, verified against the CPU fp32 step within
// the dtype's tolerance; the records say so (autocast, the cuBLAS compute type in `trainer`; fp16:
// loss scaling and its scale, 2^16 after three finite steps).
TEST(Gpt2SuiteGpu, OursInTf32Bf16AndFp16VerifiesAndTrains) {
  SKIP_WITHOUT_GPU();
  run_quick_cases(json{{"dtype", {"tf32", "bf16", "fp16"}}}, 3, [](const json& r) {
    EXPECT_TRUE(std::isfinite(r.at("loss").get<double>()));
    EXPECT_EQ(r.at("autocast"), "gemm operands");
    const std::string trainer = r.at("trainer");
    const bool fp16 = trainer.find("CUDA_R_16F operands") != std::string::npos;
    EXPECT_TRUE(trainer.find("FAST_TF32") != std::string::npos || trainer.find("CUDA_R_16BF operands") != std::string::npos ||
                fp16)
        << trainer;
    EXPECT_EQ(trainer.find("loss scaling") != std::string::npos, fp16) << trainer;
    EXPECT_EQ(r.contains("loss_scale"), fp16);
    if (fp16) EXPECT_EQ(r.at("loss_scale").get<double>(), 65536.0);
  });
}

TEST(SeqAmpGpu, SequenceModelsTrainInEachDtypeTheTrainerTakes) {
  SKIP_WITHOUT_GPU();
  for (const char* model : {"rnn", "lstm", "transformer"}) {
    int trained = 0;
    for (const auto& spec : seqamptest::cases({"cuda:0"}, model, {"fp32", "tf32", "bf16", "fp16"})) {
      if (spec.id.op != "train") continue;
      SCOPED_TRACE(spec.id.name());
      const json e = seqamptest::run(spec);
      EXPECT_EQ(e.contains("autocast"), spec.id.dtype != "fp32");
      if (spec.id.dtype == "bf16") {
        EXPECT_EQ(e.at("cublas_compute"), "CUBLAS_COMPUTE_32F on CUDA_R_16BF operands");
      }
      if (spec.id.dtype == "fp16") {  // the loss scaler: 2^16 unless a step overflowed
        EXPECT_EQ(e.at("cublas_compute"), "CUBLAS_COMPUTE_32F on CUDA_R_16F operands");
        EXPECT_EQ(e.at("loss_scale").get<double>(), 65536.0);
      }
      ++trained;
    }
    EXPECT_EQ(trained, 4);  // fp32, tf32, bf16, fp16
  }
}
