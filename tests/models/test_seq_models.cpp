// The sequence models (models/seq_zoo.h): each one's graph at tiny sizes gradchecked (fp64 reference
// against finite differences, fp32 step against the reference), its parameters as PyTorch's module
// lists them, its batches in the layout its inputs take, a few Adam steps lowering the loss on the
// synthetic data; the text dataset's decoding and its refusals.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <string>

#include "kernels/common/errors.h"
#include "models/net.h"
#include "models/seq_zoo.h"
#include "models/trainer.h"
#include "tests/attention_bias.h"
#include "tests/layer_check.h"

using namespace dlb;
using namespace dlb::models;

namespace {
SeqConfig tiny(const std::string& model) {
  SeqConfig c = SeqConfig::defaults(model);
  c.vocab = 11, c.seq = 5, c.emb = 6, c.hidden = 7, c.classes = 3;
  c.d_model = 8, c.heads = 2, c.ff = 12, c.layers = model == "rnn" ? 1 : 2;
  c.dropout = 0;
  return c;
}

// Gradcheck of a model on a batch from its own synthetic data.
layertest::Check check_model(const SeqConfig& c, int n, std::uint64_t step = 0) {
  auto m = make_seq_model(c);
  SeqConfig cc = c;
  const TokenData d = seq_data(cc, "synthetic", std::size_t(n), 3);
  std::vector<std::uint32_t> idx(static_cast<std::size_t>(n));
  std::iota(idx.begin(), idx.end(), 0u);
  SeqBatcher batcher(c);
  const Batch& b = batcher.gather(d, idx, 0, n);
  std::vector<const void*> in(b.inputs, b.inputs + m->num_inputs());
  // the labels the check makes are its own; the model's come from the batch (checked below)
  m->set_step(true, step);
  return layertest::gradcheck(*m, n, true, 7, 1e-6, in);
}

std::string temp_file(const std::string& name, const std::string& bytes) {
  const std::string p = ::testing::TempDir() + "dlb_seq_" + std::to_string(getpid()) + "_" + name;
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}
}  // namespace

TEST(SeqModels, GradcheckEachModel) {
  for (const auto& name : seq_model_names()) {
    SCOPED_TRACE(name);
    layertest::expect_ok(check_model(tiny(name), 3));
  }
}

// The key block of each attention in-projection's bias has no gradient: q.(k + b_k) shifts a query
// row's scores by q.b_k, which softmax ignores. Rounding alone is left, so the GPU tests compare
// weights after Adam steps without that block (tests/gpu_trainer_check.h says why).
TEST(SeqModels, AttentionKeyBiasHasNoGradient) {
  SeqConfig c = tiny("transformer");
  auto m = make_seq_model(c);
  m->init(4);
  const TokenData d = seq_data(c, "synthetic", 4, 5);
  std::vector<std::uint32_t> idx(4);
  std::iota(idx.begin(), idx.end(), 0u);
  SeqBatcher batcher(c);
  m->zero_grad();
  m->forward_backward(batcher.gather(d, idx, 0, 4));
  EXPECT_EQ(attnbias::expect_key_bias_grads_vanish(m->params()), 6);  // 2 encoder self, 2 decoder self, 2 decoder cross
}

// The transformer in training: dropout 0.1 everywhere (PyTorch's default), the decoder's causal mask;
// the fp32 step and the reference draw the same masks.
TEST(SeqModels, TransformerWithDropoutAndCausalMask) {
  SeqConfig c = tiny("transformer");
  c.dropout = 0.1f, c.causal = true;
  layertest::expect_ok(check_model(c, 2, 5));
}

// Parameters as the PyTorch modules list them (names, order, count).
TEST(SeqModels, ParametersArePyTorchs) {
  SeqConfig r = tiny("rnn");
  auto rnn = make_seq_model(r);
  const int V = r.vocab, E = r.emb, H = r.hidden, C = r.classes;
  EXPECT_EQ(rnn->num_params(), std::size_t(V * E + H * E + H * H + 2 * H + H * C + C));
  EXPECT_EQ(rnn->params()[1]->name, "rnn.weight_ih_l0");
  SeqConfig l = tiny("lstm");
  auto lstm = make_seq_model(l);
  EXPECT_EQ(lstm->num_params(),
            std::size_t(V * E + 4 * H * (E + H + 2) + 4 * H * (H + H + 2) + H * V + V));
  EXPECT_EQ(lstm->params()[5]->name, "lstm.weight_ih_l1");
  SeqConfig t = tiny("transformer");
  auto tr = make_seq_model(t);
  const int d = t.d_model, F = t.ff;
  const int mha = 3 * d * d + 3 * d + d * d + d, ffn = d * F + F + F * d + d, ln = 2 * d;
  EXPECT_EQ(tr->num_params(), std::size_t(V * d + 2 * (mha + ffn + 2 * ln) + 2 * (2 * mha + ffn + 3 * ln) + 2 * ln +
                                          d * V + V));
  EXPECT_EQ(tr->params()[1]->name, "transformer.encoder.layers.0.self_attn.in_proj_weight");
  EXPECT_EQ(tr->params().back()->name, "fc.bias");
}

// The rnn reads its tokens sequence-first as the seed feeds nn.RNN: [seq, n]; the others batch-first.
TEST(SeqModels, BatchLayouts) {
  const TokenData d = synthetic_tokens(20, 4, 0, 3, 1);
  std::vector<std::uint32_t> idx{2, 0, 1};
  SeqConfig r = tiny("rnn");
  r.seq = 4;
  SeqBatcher rb(r);
  const Batch& b = rb.gather(synthetic_tokens(20, 4, 3, 3, 1), idx, 0, 3);
  const TokenData dc = synthetic_tokens(20, 4, 3, 3, 1);
  const auto* t = static_cast<const std::int32_t*>(b.inputs[0]);
  EXPECT_EQ(t[1 * 3 + 0], dc.window(2)[1]);  // step 1 of batch item 0 (sample 2)
  EXPECT_EQ(b.labels[0], dc.labels[2]);
  SeqConfig tr = tiny("transformer");
  tr.seq = 4;
  SeqBatcher tb(tr);
  const Batch& c = tb.gather(d, idx, 1, 2);
  const auto* src = static_cast<const std::int32_t*>(c.inputs[0]);
  EXPECT_EQ(src[4 + 3], d.window(1)[3]);     // item 1 = sample 1, position 3
  EXPECT_EQ(c.labels[4 + 3], d.window(1)[4]);  // its next token
}

// Some Adam steps on the synthetic data lower each model's loss (the structure is learnable).
TEST(SeqModels, TrainingLowersTheLoss) {
  for (const auto& name : seq_model_names()) {
    SCOPED_TRACE(name);
    SeqConfig c = tiny(name);
    c.vocab = 16, c.seq = 8, c.hidden = 32, c.emb = 16, c.d_model = 16, c.ff = 32;
    auto m = make_seq_model(c);
    m->init(1);
    const TokenData d = seq_data(c, "synthetic", 64, 2);
    OptimizerConfig opt = default_optimizer(name);
    opt.lr = 1e-2f;  // Adam, faster than the default 1e-3 so that a few steps tell
    auto tr = make_trainer(*m, opt, TrainOptions{});
    SeqBatcher batcher(c);
    const auto idx = epoch_order(d.size(), 1);
    double first = 0, last = 0;
    for (int e = 0; e < 15; ++e) {
      double sum = 0;
      for (std::size_t f = 0; f < d.size(); f += 16) sum += tr->train_batch(batcher.gather(d, idx, f, 16));
      (e == 0 ? first : last) = sum;
    }
    EXPECT_LT(last, 0.8 * first);
  }
}

// The CPU trainer's infer_batch is the eval-mode forward's loss (dropout off, unlike a training
// forward's) and changes no weight.
TEST(SeqModels, InferBatchIsTheEvalModeForward) {
  SeqConfig c = tiny("transformer");
  c.dropout = 0.5f;
  auto m = make_seq_model(c), copy = make_seq_model(c);
  m->init(2);
  copy->copy_params_from(*m);
  const TokenData d = seq_data(c, "synthetic", 3, 4);
  const std::vector<std::uint32_t> idx{0, 1, 2};
  SeqBatcher batcher(c);
  const Batch& b = batcher.gather(d, idx, 0, 3);
  auto tr = make_trainer(*m, default_optimizer("transformer"), TrainOptions{});
  const float loss = tr->infer_batch(b);
  EXPECT_FLOAT_EQ(tr->infer_batch(b), loss);
  EXPECT_FLOAT_EQ(forward_loss(*copy, b), loss);
  copy->set_step(true, 0);
  copy->zero_grad();
  EXPECT_GT(std::abs(copy->forward_backward(b) - loss), 1e-3 * loss);  // dropout's masks drawn
  const auto pm = m->params(), pc = copy->params();
  for (std::size_t i = 0; i < pm.size(); ++i) EXPECT_EQ(pm[i]->value, pc[i]->value) << pm[i]->name;
}

TEST(SeqModels, SizesThatDoNotFitAreInputErrors) {
  SeqConfig t = SeqConfig::defaults("transformer");
  t.heads = 5;
  EXPECT_THROW(make_seq_model(t), InputError);
  SeqConfig s = SeqConfig::defaults("lstm");
  s.seq = kMaxSeq + 1;
  EXPECT_THROW(make_seq_model(s), InputError);
  s.seq = 0;
  EXPECT_THROW(make_seq_model(s), InputError);
  EXPECT_THROW(SeqConfig::defaults("gru"), UsageError);
}

TEST(SeqData, TextIsCharacterLevel) {
  const std::string p = temp_file("ok.txt", "h\xC3\xA9llo h\xC3\xA9llo\n");  // "héllo héllo\n": 12 characters
  SeqConfig c = SeqConfig::defaults("lstm");
  c.seq = 4;
  const TokenData d = seq_data(c, "text:" + p, 10, 1);
  EXPECT_EQ(d.alphabet, (std::vector<std::uint32_t>{'\n', ' ', 'h', 'l', 'o', 0xE9}));
  EXPECT_EQ(c.vocab, 6);
  EXPECT_EQ(d.stream.size(), 12u);
  EXPECT_EQ(d.stream[1], 5);  // é
  for (std::size_t i = 0; i < d.size(); ++i) EXPECT_LE(d.start[i] + 5, d.stream.size());
  SeqConfig r = SeqConfig::defaults("rnn");
  r.seq = 4;
  seq_data(r, "text:" + p, 2, 1);
  EXPECT_EQ(r.classes, 6);  // the rnn classifies the next character
  std::remove(p.c_str());
}

TEST(SeqData, BadTextIsInputError) {
  SeqConfig c = SeqConfig::defaults("lstm");
  c.seq = 4;
  const std::pair<const char*, std::string> bad[] = {
      {"empty", ""},
      {"binary", std::string("ab\0cdefgh", 9)},
      {"latin1", "caf\xE9 au lait"},
      {"overlong", "ab\xC0\xAF" "cdefg"},
      {"short", "abc"},
  };
  for (const auto& [name, bytes] : bad) {
    SCOPED_TRACE(name);
    const std::string p = temp_file(name, bytes);
    SeqConfig cc = c;
    EXPECT_THROW(seq_data(cc, "text:" + p, 4, 1), InputError);
    std::remove(p.c_str());
  }
  const std::string p = temp_file("wide.txt", "abcdefghij");
  SeqConfig v = c;
  v.vocab = 5;  // given, smaller than the file's 10 characters
  EXPECT_THROW(seq_data(v, "text:" + p, 4, 1, true), InputError);
  std::remove(p.c_str());
  SeqConfig x = c;
  EXPECT_THROW(seq_data(x, "text:/nonexistent/dlbench.txt", 4, 1), InputError);
  EXPECT_THROW(seq_data(x, "cifar", 4, 1), UsageError);
}
