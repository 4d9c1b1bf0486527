// Suite amp on the sequence models (bench/amp.cpp): rnn, lstm and transformer train under bf16
// autocast beside fp32, checked in lockstep against fp32 over a few steps (the loss within bf16's
// tolerance, every gradient tensor within the half types' relative L2), at every ISA level this CPU
// runs (native bf16 compute where it has avx512_bf16, emulated below); throughput in tokens/s; the
// plan runs the recurrent layers' GEMMs in bf16 where the CPU computes it, oneDNN's RNN impl and the
// emulated path as plain layers; on a GPU a train case per dtype (the CUDA sequence trainer).
#include <gtest/gtest.h>

#include <string>

#include "bench/suite.h"
#include "kernels/common/errors.h"
#include "kernels/common/verify.h"
#include "kernels/cpu/isa.h"
#include "models/plan.h"
#include "models/seq_zoo.h"
#include "tests/bench/seq_amp_cases.h"

using namespace dlb;
using bench::json;

namespace {
std::vector<bench::CaseSpec> expand(const std::vector<std::string>& devices, const std::string& model) {
  return seqamptest::cases(devices, model, {"fp32", "bf16"});
}
}  // namespace

TEST(SeqAmp, Bf16TrainsInLockstepWithFp32AtEveryIsaLevel) {
  using cpu::Isa;
  for (const char* model : {"rnn", "lstm", "transformer"})
    for (Isa isa : {Isa::avx2, Isa::avx512_bf16}) {
      if (int(isa) > int(cpu::isa_cap())) continue;
      cpu::IsaLimit lim(isa);
      const auto cs = expand({"cpu"}, model);
      ASSERT_EQ(cs.size(), 2u);  // fp32, bf16
      for (const auto& spec : cs) {
        SCOPED_TRACE(spec.id.name() + " isa " + cpu::isa_name(isa));
        const json e = seqamptest::run(spec);
        EXPECT_EQ(e.at("work_items"), 2 * 32);  // batch 2 x the default sequence of 32
        EXPECT_LE(e.at("parity_grad_rel_err").get<double>(), kHalfGradientL2Tolerance);
        if (spec.id.dtype == "bf16") {
          EXPECT_GT(e.at("parity_grad_rel_err").get<double>(), 0);  // bf16 rounded something
          if (isa == Isa::avx2) {
            EXPECT_EQ(e.at("bf16_compute"), "emulated");
          }
        }
      }
    }
}

// On a GPU the sequence models train in the CUDA sequence trainer, fp32 and (GEMM autocast) bf16: a
// train case per dtype, in tokens/s (they run in tests/bench/test_gpt2_suite_gpu.cu where a GPU is).
TEST(SeqAmp, TheGpuRowsAreMadeInEachDtypeInTokensPerSecond) {
  const auto cs = expand({"cuda:0"}, "lstm");
  ASSERT_GE(cs.size(), 2u);  // fp32, bf16 (and our bf16 cast kernel's case where CUDA is built)
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(cs[std::size_t(k)].id.op, "train");
    EXPECT_EQ(cs[std::size_t(k)].id.dtype, k == 0 ? "fp32" : "bf16");
    EXPECT_EQ(cs[std::size_t(k)].make()->metric(), bench::Metric::tokens_per_s);
  }
}

TEST(SeqAmp, ThePlanRunsRecurrentGemmsInBf16WhereTheCpuComputesIt) {
  auto kinds = [](models::RnnImpl impl) {
    models::SeqConfig c = models::SeqConfig::defaults("lstm");
    c.impl = impl;
    const auto m = models::make_seq_model(c);
    std::string s;
    for (const auto& st : models::make_plan(*m, 2, DType::bf16).steps) s += std::string(models::step_kind_name(st.kind)) + " ";
    return s;
  };
  {
    cpu::IsaLimit lim(cpu::Isa::avx2);  // emulated: the layer as it is, its operands rounded by the plan
    EXPECT_EQ(kinds(models::RnnImpl::ours).find("recurrent_bf16"), std::string::npos);
  }
  if (!models::bf16_compute_native()) GTEST_SKIP() << "this CPU does not compute bf16 (no avx512_bf16 or no oneDNN)";
  EXPECT_EQ(kinds(models::RnnImpl::ours), "layer recurrent_bf16 layer linear_bf16 ");  // embedding, lstm, select, fc
  EXPECT_EQ(kinds(models::RnnImpl::onednn).find("recurrent_bf16"), std::string::npos);
}
