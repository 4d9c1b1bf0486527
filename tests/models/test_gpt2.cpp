// The gpt2 model (models/gpt2.h) at a tiny size: gradchecked (fp64 reference against finite
// differences, the fp32 step against the reference: our flash attention, LayerNorm, GELU, the tied
// head), llm.c's tensors in and out of it exactly, its parameters counted as llm.c counts them, the
// batches cut as llm.c's loader cuts them, AdamW steps lowering the loss.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "kernels/common/autocast_tolerance.h"
#include "kernels/common/errors.h"
#include "kernels/cpu/isa.h"
#include "models/amp.h"
#include "models/executor.h"
#include "models/half.h"
#include "models/gpt2.h"
#include "models/layers.h"
#include "tests/attention_bias.h"
#include "tests/layer_check.h"

using namespace dlb;
using namespace dlb::models;

namespace {
Gpt2Config tiny() {
  Gpt2Config c;
  c.name = "tiny", c.max_seq_len = 8, c.vocab_size = 13, c.padded_vocab_size = 16, c.num_layers = 2;
  c.num_heads = 2, c.channels = 8;
  return c;
}

// Two sequences of 6 of tiny()'s tokens and their next tokens, as a Batch (x may be changed in place).
struct TinyBatch {
  std::vector<std::int32_t> x{3, 0, 12, 7, 1, 5, 5, 9, 2, 11, 4, 6}, y{0, 12, 7, 1, 5, 5, 9, 2, 11, 4, 6, 8};
  const void* in[1] = {x.data()};
  Batch b;
  TinyBatch() { b.n = 2, b.labels = y.data(), b.inputs = in; }
  TinyBatch(const TinyBatch&) = delete;
  TinyBatch& operator=(const TinyBatch&) = delete;
};
}  // namespace

TEST(Gpt2, Gradcheck) {
  auto m = make_gpt2(gpt2_random_weights(tiny(), 1), 5);
  EXPECT_EQ(m->output_shape(2), (Shape{2, 5, 13}));
  std::vector<std::int32_t> tokens{3, 0, 12, 7, 1, 5, 5, 9, 2, 11};
  layertest::expect_ok(layertest::gradcheck(*m, 2, true, 7, 1e-6, {tokens.data()}));
}

TEST(Gpt2, LlmcTensorsInAndOutExactly) {
  const Gpt2Config c = tiny();
  const Gpt2Weights w = gpt2_random_weights(c, 2);
  auto m = make_gpt2(w, 8);
  EXPECT_EQ(m->num_params(), c.num_params());  // wte once (the head borrows it), with its padded rows
  EXPECT_EQ(m->params().size(), 2 + 12 * std::size_t(c.num_layers) + 2);
  EXPECT_EQ(gpt2_param(*m, kFcprojw, 1).name, "h.1.mlp.c_proj.weight");
  EXPECT_EQ(gpt2_param(*m, kFcprojw, 1).shape, (std::vector<int>{8, 32}));
  EXPECT_EQ(gpt2_export(*m, c, false).data, w.data);
  EXPECT_THROW(make_gpt2(w, 9), InputError);  // past max_seq_len
  // the clone's head reads the clone's table
  auto k = m->clone();
  EXPECT_EQ(k->params().size(), m->params().size());
  EXPECT_EQ(gpt2_export(*k, c, false).data, w.data);
}

TEST(Gpt2, BatchesAsLlmcCutsThem) {
  std::vector<std::uint16_t> t(15);
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = std::uint16_t(i);
  Gpt2Batcher b(t, 2, 3);
  const Batch& b1 = b.next();
  const auto* x = static_cast<const std::int32_t*>(b1.inputs[0]);
  EXPECT_EQ(x[0], 0);
  EXPECT_EQ(x[5], 5);
  EXPECT_EQ(b1.labels[5], 6);
  EXPECT_EQ(b1.n, 2);
  b.next();
  const Batch& b3 = b.next();  // 12 + 6 + 1 > 15 tokens: back to the start
  EXPECT_EQ(static_cast<const std::int32_t*>(b3.inputs[0])[0], 0);
  EXPECT_THROW(Gpt2Batcher(t, 4, 4), UsageError);
}

TEST(Gpt2, AdamWLowersTheLoss) {
  const Gpt2Config c = tiny();
  auto m = make_gpt2(gpt2_random_weights(c, 3), 8);
  Gpt2Batcher b(gpt2_random_tokens(17, c.vocab_size, 4), 2, 8);
  const Batch& batch = b.next();
  OptimizerConfig o = gpt2_optimizer();
  o.lr = 1e-2f;
  Optimizer opt(o, m->params());
  float first = 0, last = 0;
  for (int s = 0; s < 10; ++s) {
    m->zero_grad();
    last = m->forward_backward(batch);
    if (s == 0) first = last;
    opt.step();
  }
  EXPECT_NEAR(first, std::log(13.0), 0.2);  // GPT-2's N(0, 0.02) init: near-uniform predictions
  EXPECT_LT(last, first - 0.5);
}

// --checkpoint-activations: the blocks' forward again in backward gives the same loss and
// bit-identical gradients (the recompute runs the same kernels on the same inputs), in less memory.
// As the sequence transformer's (test_seq_models.cpp): c_attn.bias's key block has no gradient
// under the causal mask too (the shift is per query row, over the keys it sees).
TEST(Gpt2, AttentionKeyBiasHasNoGradient) {
  const Gpt2Config c = tiny();
  auto m = make_gpt2(gpt2_random_weights(c, 7), 8);
  Gpt2Batcher b(gpt2_random_tokens(17, c.vocab_size, 8), 2, 8);
  m->zero_grad();
  m->forward_backward(b.next());
  EXPECT_EQ(attnbias::expect_key_bias_grads_vanish(m->params()), c.num_layers);
}

TEST(Gpt2, CheckpointedBlocksGiveTheSameGradients) {
  const Gpt2Config c = tiny();
  auto plain = make_gpt2(gpt2_random_weights(c, 5), 8);
  auto ckpt = make_gpt2(gpt2_random_weights(c, 5), 8);
  ckpt->set_checkpointing(true);
  EXPECT_EQ(ckpt->checkpoint_segments().size(), std::size_t(c.num_layers));
  Gpt2Batcher b(gpt2_random_tokens(49, c.vocab_size, 6), 3, 8);
  for (int step = 0; step < 2; ++step) {  // the second step reuses the plan and its shared slots
    const Batch& batch = b.next();
    plain->zero_grad(), ckpt->zero_grad();
    EXPECT_EQ(plain->forward_backward(batch), ckpt->forward_backward(batch));
    EXPECT_EQ(gpt2_export(*plain, c, true).data, gpt2_export(*ckpt, c, true).data);
  }
  // 2 blocks of 9 values kept -> one shared set: the values and gradients of one block fewer
  const std::size_t block = 2 * sizeof(float) * 3 * 8 * std::size_t(c.channels) * (1 + 3 + 1 + 1 + 1 + 1 + 4 + 4 + 1);
  EXPECT_EQ(plain->activation_bytes() - ckpt->activation_bytes(), block);
  // off again: the executor plans again and the gradients still agree
  ckpt->set_checkpointing(false);
  ckpt->zero_grad(), plain->zero_grad();
  EXPECT_EQ(plain->forward_backward(b.batch()), ckpt->forward_backward(b.batch()));
  EXPECT_EQ(plain->activation_bytes(), ckpt->activation_bytes());
}

// Where the CPU computes bf16 the AMP step leaves alone the Linear weights its bf16 steps cast
// themselves (round to nearest even either way): its loss and gradients are those of the executor on
// a copy whose every cast parameter was rounded first, bit for bit.
TEST(Gpt2, Bf16StepEqualsTheExecutorOnRoundedParameters) {
  if (!bf16_compute_native()) GTEST_SKIP() << "no native bf16 here: the trainer rounds every cast parameter itself";
  const Gpt2Config c = tiny();
  auto a = make_gpt2(gpt2_random_weights(c, 4), 6), r = make_gpt2(gpt2_random_weights(c, 4), 6);
  Optimizer opt(gpt2_optimizer(), a->params());
  AmpTrainer t(*a, opt, DType::bf16);
  const auto pa = a->params(), pr = r->params();
  for (std::size_t i = 0; i < pa.size(); ++i)  // GPT-2's init zeroes the biases, which bf16 holds exactly
    if (pa[i]->name.find("bias") != std::string::npos) {
      fill_uniform(pa[i]->value.data(), pa[i]->size(), 30 + i);
      fill_uniform(pr[i]->value.data(), pr[i]->size(), 30 + i);
    }
  for (const Param* p : t.cast_params()) {
    const auto i = std::size_t(std::find(pa.begin(), pa.end(), p) - pa.begin());
    round_to(DType::bf16, pr[i]->value.data(), pr[i]->size());
  }
  Gpt2Batcher b(gpt2_random_tokens(25, c.vocab_size, 8), 2, 6);
  const Batch& batch = b.next();
  Executor ex(DType::bf16);
  r->zero_grad();
  const float want = ex.forward_backward(*r, batch, {});
  EXPECT_EQ(t.gradients(batch), want);
  EXPECT_EQ(gpt2_export(*a, c, true).data, gpt2_export(*r, c, true).data);
}

// The bf16 AMP step with each block recomputed in backward gives the bits of the step without: the
// recomputed forward casts its operands again into the step's scratch, which the bf16 steps'
// backward reads (dense_bf16_backward's cast_by_forward).
TEST(Gpt2, CheckpointedBf16StepGivesTheSameGradients) {
  const Gpt2Config c = tiny();
  auto plain = make_gpt2(gpt2_random_weights(c, 5), 8), ckpt = make_gpt2(gpt2_random_weights(c, 5), 8);
  ckpt->set_checkpointing(true);
  Optimizer op(gpt2_optimizer(), plain->params()), oc(gpt2_optimizer(), ckpt->params());
  AmpTrainer tp(*plain, op, DType::bf16), tc(*ckpt, oc, DType::bf16);
  Gpt2Batcher b(gpt2_random_tokens(49, c.vocab_size, 6), 3, 8);
  for (int step = 0; step < 3; ++step) {
    const Batch& batch = b.next();
    EXPECT_EQ(tp.gradients(batch), tc.gradients(batch)) << "step " << step;
    EXPECT_EQ(gpt2_export(*plain, c, true).data, gpt2_export(*ckpt, c, true).data) << "step " << step;
    op.step(), oc.step();
  }
  EXPECT_LT(tc.activation_bytes(), tp.activation_bytes());
}

TEST(Gpt2, CheckpointSegmentsMustHoldTheirValues) {
  auto g = make_gpt2(gpt2_random_weights(tiny(), 1), 4);
  EXPECT_THROW(g->add_checkpoint_segment(3, 2), UsageError);
  EXPECT_THROW(g->add_checkpoint_segment(0, 1000), UsageError);
  EXPECT_THROW(g->add_checkpoint_segment(1, 4), UsageError);  // overlaps block 0's
  // fc1's output is read by the residual add outside the segment [fc1, fc2]
  Model m("res", Shape{1, 4}, LossKind::mse);
  const int a = m.node<Linear>({0}, "fc1", 4, 4);
  m.node<Add>({a, m.node<Linear>({a}, "fc2", 4, 4)});
  m.init(1);
  m.add_checkpoint_segment(0, 2);
  m.set_checkpointing(true);
  std::vector<float> x{1, 2, 3, 4};
  EXPECT_THROW(m.forward_backward(Batch{x.data(), nullptr, nullptr, 1}), UsageError);
  m.set_checkpointing(false);
  EXPECT_TRUE(std::isfinite(m.forward_backward(Batch{x.data(), nullptr, nullptr, 1})));
}

// A step that throws (here a token outside the vocabulary, found by the embedding after the weights
// were cast) leaves the fp32 masters in the model, bit for bit, and the next step runs as usual.
TEST(Gpt2, Bf16StepThatThrowsLeavesTheMastersInPlace) {
  const Gpt2Config c = tiny();
  for (const cpu::Isa isa : {cpu::Isa::avx2, cpu::Isa::avx512_bf16}) {
    if (int(isa) > int(cpu::isa_cap())) continue;
    cpu::IsaLimit lim(isa);
    SCOPED_TRACE(std::string("isa ") + cpu::isa_name(isa));
    auto m = make_gpt2(gpt2_random_weights(c, 5), 6);
    Optimizer opt(gpt2_optimizer(), m->params());
    AmpTrainer t(*m, opt, DType::bf16);
    ASSERT_FALSE(t.cast_params().empty());
    // GPT-2's biases start at zero, which rounds to itself: give every cast value bits bf16 lacks.
    for (Param* p : t.cast_params())
      for (std::size_t i = 0; i < p->value.size(); ++i) p->value[i] += 1e-3f * float(i % 7 + 1) / 3;
    TinyBatch tb;
    const Gpt2Weights before = gpt2_export(*m, c, false);
    tb.x[7] = c.padded_vocab_size;
    EXPECT_THROW(t.gradients(tb.b), InputError);
    EXPECT_EQ(gpt2_export(*m, c, false).data, before.data);
    tb.x[7] = 9;
    EXPECT_TRUE(std::isfinite(t.gradients(tb.b)));
    EXPECT_EQ(gpt2_export(*m, c, false).data, before.data);
  }
}

// The bf16 AMP step (AmpTrainer, PyTorch's autocast policy): every Linear's weight and bias is cast,
// the tied token table is not (its embedding lookup reads fp32, as in PyTorch; the head's bf16 step
// casts its own operand); where the CPU computes bf16 the plan runs the Linears and the head in bf16
// steps; the loss and each gradient track the fp32 step within bf16's autocast tolerance and the
// fp32 values come back unchanged. Emulated (AVX2) and, where the CPU has it, native.
TEST(Gpt2, Bf16AutocastStepCastsTheLinearsNotTheTiedTable) {
  const Gpt2Config c = tiny();
  for (const cpu::Isa isa : {cpu::Isa::avx2, cpu::Isa::avx512_bf16}) {
    if (int(isa) > int(cpu::isa_cap())) continue;
    cpu::IsaLimit lim(isa);
    SCOPED_TRACE(std::string("isa ") + cpu::isa_name(isa));
    const bool native = bf16_compute_native();
    auto m = make_gpt2(gpt2_random_weights(c, 3), 6), f = make_gpt2(gpt2_random_weights(c, 3), 6);
    Optimizer opt(gpt2_optimizer(), m->params());
    AmpTrainer t(*m, opt, DType::bf16);
    const auto& cast = t.cast_params();
    EXPECT_EQ(cast.size(), std::size_t(8 * c.num_layers));  // c_attn, attn.c_proj, c_fc, mlp.c_proj: weight, bias
    EXPECT_EQ(std::count(cast.begin(), cast.end(), &gpt2_param(*m, kWte, 0)), 0);
    EXPECT_EQ(std::count(cast.begin(), cast.end(), &gpt2_param(*m, kQkvw, 1)), 1);
    int bf16_steps = 0, heads = 0;
    for (const Step& s : t.plan(2).steps) {
      bf16_steps += s.kind == StepKind::linear_bf16 || s.kind == StepKind::lm_head_bf16;
      heads += s.kind == StepKind::lm_head_bf16;
    }
    EXPECT_EQ(bf16_steps, native ? 4 * c.num_layers + 1 : 0);
    EXPECT_EQ(heads, native ? 1 : 0);

    const TinyBatch tb;
    const Batch& b = tb.b;
    const Gpt2Weights before = gpt2_export(*m, c, false);
    const double got = t.gradients(b);
    EXPECT_EQ(gpt2_export(*m, c, false).data, before.data);  // the masters are back, bit for bit
    f->zero_grad();
    const double want = f->forward_backward(b);
    const StepTolerance tol = autocast_step_tolerance(DType::bf16);
    EXPECT_LT(std::abs(got - want) / std::abs(want), tol.loss);
    EXPECT_NE(got, want) << "no bf16 rounding seen";
    const auto pm = m->params(), pf = f->params();
    for (std::size_t i = 0; i < pm.size(); ++i) {
      L2Error l2;
      l2.add(pm[i]->grad.data(), pf[i]->grad.data(), pm[i]->size());
      EXPECT_LT(l2.rel(), tol.grad_l2) << pm[i]->name;
    }
  }
}
