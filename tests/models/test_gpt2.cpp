// The gpt2 model (models/gpt2.h) at a tiny size: gradchecked (fp64 reference against finite
// differences, the fp32 step against the reference: our flash attention, LayerNorm, GELU, the tied
// head), llm.c's tensors in and out of it exactly, its parameters counted as llm.c counts them, the
// batches cut as llm.c's loader cuts them, AdamW steps lowering the loss.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/common/errors.h"
#include "models/gpt2.h"
#include "models/layers.h"
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
