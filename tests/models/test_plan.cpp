// Plans and the executor (models/plan.h, models/executor.h): which step kinds the rules table makes
// for the seed models at every ISA level this CPU runs (expected from the kernels' own shape
// predicates, so no CPU is assumed), the autocast roundings a plan carries, a plan made again when
// the ISA cap changes, the GPU's plan, and the gradients-ready hook.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/common/errors.h"
#include "kernels/cpu/conv2d/conv2d.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/onednn/onednn.h"
#include "models/amp.h"
#include "models/executor.h"
#include "models/net.h"
#include "models/seq_zoo.h"

using namespace dlb;
using namespace dlb::models;
using cpu::Isa;

namespace {

std::vector<Isa> levels() {
  std::vector<Isa> v;
  for (Isa i : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::avx512_bf16})
    if (static_cast<int>(i) <= static_cast<int>(cpu::isa_cap())) v.push_back(i);
  return v;
}

std::string kinds(const Plan& p) {
  std::string s;
  for (const Step& st : p.steps) s += std::string(s.empty() ? "" : " ") + step_kind_name(st.kind);
  return s;
}

Conv2dShape conv_shape(Model& m, int node, int n) {
  return static_cast<Conv2d&>(*m.layers()[std::size_t(node)]).conv_shape(m.value_shapes(n)[std::size_t(node)]);
}

}  // namespace

// net128 in fp32: the first conv fused with its ReLU + pool where the kernels take the shape, ReLU +
// pool fused after conv2, conv2's backward over dy's nonzeros where that kernel takes the shape.
TEST(Plan, Net128Fp32AtEveryIsa) {
  auto m = make_model("net128");
  for (Isa isa : levels()) {
    cpu::IsaLimit limit(isa);
    SCOPED_TRACE(cpu::isa_name(isa));
    const Plan p = make_plan(*m, 8, DType::fp32);
    const bool fused = cpu::conv2d_relu_pool_fusable(conv_shape(*m, 0, 8), 2);
    const bool sparse = cpu::conv2d_backward_sparse_dy_shape(conv_shape(*m, 3, 8), false);
    const std::string conv2 = sparse ? "conv_sparse_dy" : "layer";
    EXPECT_EQ(kinds(p), std::string(fused ? "conv_relu_pool" : "layer relu_pool") + " " + conv2 +
                            " relu_pool layer layer layer layer layer layer");
    EXPECT_EQ(p.steps[0].name, fused ? "conv1+relu1+pool1" : "conv1");
    EXPECT_EQ(p.steps[0].ready.size(), 2u);  // conv1.weight, conv1.bias
    EXPECT_EQ(p.steps[0].bwd_flops, p.steps[0].fwd_flops);  // no input gradient for the first layer
    for (const Step& s : p.steps) {
      EXPECT_EQ(s.round_out, DType::fp32) << s.name;
      EXPECT_FALSE(s.round_dw) << s.name;
    }
  }
}

// bf16 emulated (below avx512_bf16): fp32 kernels between the roundings; the input is rounded on a
// copy, Linear's output and dx are rounded, its weight gradients too; ReLU + pool round nothing.
TEST(Plan, MlpBf16Emulated) {
  auto m = make_model("mlp");
  cpu::IsaLimit limit(Isa::avx512);
  ASSERT_FALSE(bf16_compute_native());
  const Plan p = make_plan(*m, 4, DType::bf16);
  EXPECT_EQ(kinds(p), "layer layer layer layer");  // Flatten, Linear, ReLU, Linear
  EXPECT_FALSE(p.cast_input[0]);                  // Flatten is exact: the first Linear rounds its output in place
  const Step& fc1 = p.steps[1];
  EXPECT_TRUE(fc1.round_in[0]);
  EXPECT_EQ(fc1.round_out, DType::bf16);
  EXPECT_EQ(fc1.round_dx, DType::bf16);
  EXPECT_TRUE(fc1.round_dw);
  const Step& relu = p.steps[2];
  EXPECT_FALSE(relu.round_in[0]);
  EXPECT_EQ(relu.round_out, DType::fp32);  // exact
  EXPECT_EQ(p.steps[3].round_dy, DType::bf16);  // the loss gradient, in the output's dtype
}

// net128 in native bf16: the first layer fused in bf16, handing its output on in nChw16c to conv2,
// whose output the pool reads in that layout; Linear layers on the bf16 GEMM.
TEST(Plan, Net128Bf16Native) {
  if (!bf16_compute_native()) GTEST_SKIP() << "no native bf16 compute here";
  auto m = make_model("net128");
  const Plan p = make_plan(*m, 8, DType::bf16);
  ASSERT_TRUE(cpu::conv2d_relu_pool_bf16_fusable(conv_shape(*m, 0, 8), 2));
  const bool blocked = cpu::onednn::conv2d_forward_writes_nchw16c(conv_shape(*m, 3, 8), true);
  EXPECT_EQ(kinds(p), std::string("conv_relu_pool_bf16 ") + (blocked ? "conv_bf16_relu_pool" : "conv_sparse_dy_bf16 relu_pool") +
                          " layer linear_bf16 layer linear_bf16 layer linear_bf16");
  EXPECT_FALSE(p.cast_input[0]);  // the fused first layer rounds x as it reads it
  if (blocked && cpu::onednn::conv2d_forward_reads_nchw16c_src(conv_shape(*m, 3, 8), true)) {
    EXPECT_EQ(p.steps[0].hand_on, 1);
    EXPECT_EQ(p.steps[1].hand_from, 0);
  }
  EXPECT_TRUE(p.steps[0].round_dw);
  EXPECT_EQ(p.steps[0].round_out, DType::fp32);  // the kernel's output is bf16 already
  const Step& fc1 = p.steps[3];
  EXPECT_FALSE(fc1.round_in[0]);  // Flatten of bf16 values
  EXPECT_EQ(fc1.round_out, DType::bf16);
}

// An executor's plan follows the ISA cap: made again when a limit comes and goes.
TEST(Plan, ExecutorPlansAgainWhenTheIsaCapChanges) {
  auto m = make_model("net128");
  const bool fused = cpu::conv2d_relu_pool_fusable(conv_shape(*m, 0, 4), 2);
  Executor e(DType::fp32);
  EXPECT_EQ(e.plan(*m, 4).steps[0].kind, fused ? StepKind::conv_relu_pool : StepKind::layer);
  {
    cpu::IsaLimit scalar(Isa::scalar);
    EXPECT_EQ(e.plan(*m, 4).steps[0].kind, StepKind::layer);
  }
  EXPECT_EQ(e.plan(*m, 4).steps[0].kind, fused ? StepKind::conv_relu_pool : StepKind::layer);
}

// The GPU trainer's plan: a layer step per layer, named as the CPU names them.
TEST(Plan, CudaPlanIsOneLayerStepPerLayer) {
  for (const auto& name : model_names()) {
    auto m = make_model(name);
    const Plan p = make_plan(*m, 2, DType::bf16, Device::cuda);
    ASSERT_EQ(p.steps.size(), m->layers().size()) << name;
    for (std::size_t i = 0; i < p.steps.size(); ++i) {
      EXPECT_EQ(p.steps[i].kind, StepKind::layer) << name;
      EXPECT_EQ(p.steps[i].name, m->layer_name(i)) << name;
      EXPECT_EQ(p.steps[i].round_out, DType::fp32) << name;  // the GPU trainer does its own autocast
    }
  }
}

// During backward each parameter is reported once, when its gradient is final: steps in reverse.
TEST(Plan, GradientsReadyOnceEachInReverse) {
  auto m = make_model("net128");
  m->init(1);
  std::vector<float> x(m->input_shape(4).size(), 0.25f);
  std::vector<std::int32_t> y{1, 2, 3, 4};
  std::vector<std::string> order;
  m->zero_grad();
  m->forward_backward(Batch{x.data(), y.data(), nullptr, 4}, [&](const std::vector<Param*>& ps) {
    for (Param* p : ps) order.push_back(p->name);
  });
  const std::vector<std::string> want{"fc3.weight", "fc3.bias", "fc2.weight", "fc2.bias", "fc1.weight",
                                      "fc1.bias",   "conv2.weight", "conv2.bias", "conv1.weight", "conv1.bias"};
  EXPECT_EQ(order, want);
}

// A model that grows after a step is planned again: the next step runs the new graph.
TEST(Plan, GraphGrownAfterAStepIsPlannedAgain) {
  Model m("t", {1, 6}, LossKind::mse);
  m.add<Linear>("fc1", 6, 4);
  std::vector<float> x(12, 0.5f);
  EXPECT_EQ(m.predict(x.data(), 2).size(), 8u);
  m.add<ReLU>().add<Linear>("fc2", 4, 3);
  EXPECT_EQ(m.predict(x.data(), 2).size(), 6u);
}

// A model with a second input refuses a batch that does not carry it, naming the input.
TEST(Plan, MissingInputIsAUsageError) {
  Model m("t", {1, 4}, LossKind::mse);
  const int b = m.add_input({1, 4});
  m.node<Add>({0, b});
  std::vector<float> x(8, 1.f), x2(8, 2.f), target(8, 0.f);
  EXPECT_THROW(m.forward_backward(Batch{x.data(), nullptr, target.data(), 2}), UsageError);
  const void* both[] = {x.data(), x2.data()};
  Batch ok{x.data(), nullptr, target.data(), 2};
  ok.inputs = both;
  m.zero_grad();
  EXPECT_FLOAT_EQ(m.forward_backward(ok), 9.f);  // (1 + 2 - 0)^2
}

// The transformer's feed-forward ReLU -> Dropout runs as one relu_dropout step on the CPU in fp32
// (four of them: two encoder and two decoder layers), named by both layers; not under autocast
// (bf16) nor on the GPU. The fused step's numbers are checked against the fp64 reference with
// dropout on in test_seq_models.cpp (TransformerWithDropoutAndCausalMask).
TEST(Plan, TransformerFeedForwardFusesReluAndDropout) {
  SeqConfig c = SeqConfig::defaults("transformer");
  c.vocab = 11, c.seq = 5, c.d_model = 8, c.heads = 2, c.ff = 12, c.layers = 2;
  auto m = make_seq_model(c);
  auto count = [](const Plan& p) {
    int k = 0;
    for (const Step& s : p.steps) k += s.kind == StepKind::relu_dropout;
    return k;
  };
  const Plan p = make_plan(*m, 2, DType::fp32);
  EXPECT_EQ(count(p), 4);
  for (const Step& s : p.steps)
    if (s.kind == StepKind::relu_dropout) {
      EXPECT_EQ(s.nodes, 2);
      EXPECT_NE(s.name.find("relu"), std::string::npos);
      EXPECT_NE(s.name.find("+dropout"), std::string::npos);
    }
  EXPECT_EQ(count(make_plan(*m, 2, DType::bf16)), 0);
  EXPECT_EQ(count(make_plan(*m, 2, DType::fp32, Device::cuda)), 0);
}

// Under native bf16 the transformer's six attention layers (two encoder self, two decoder self, two
// decoder cross) run their projections in bf16 (attention_bf16), its Linear layers in linear_bf16.
TEST(Plan, TransformerAttentionInBf16WhereTheCpuComputesIt) {
  if (!bf16_compute_native()) GTEST_SKIP() << "no native bf16 compute here";
  SeqConfig c = SeqConfig::defaults("transformer");
  c.vocab = 11, c.seq = 5, c.d_model = 8, c.heads = 2, c.ff = 12, c.layers = 2;
  auto m = make_seq_model(c);
  int attn = 0;
  for (const Step& s : make_plan(*m, 2, DType::bf16).steps) {
    attn += s.kind == StepKind::attention_bf16;
    if (s.kind == StepKind::attention_bf16) {
      EXPECT_TRUE(s.round_dw) << s.name;
    }
  }
  EXPECT_EQ(attn, 6);
  for (const Step& s : make_plan(*m, 2, DType::fp32).steps) EXPECT_NE(s.kind, StepKind::attention_bf16);
}
