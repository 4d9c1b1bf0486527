// The sequence models' layers (models/layers/: Embedding, Recurrent, SelectStep, LayerNorm, Dropout,
// PositionalEncoding, MultiheadAttention), each in a small model: its fp64 reference against finite
// differences and its fp32 path against the reference (tests/layer_check.h), at every ISA level the
// CPU runs; the layouts (sequence-first, batch_first), initial states, tied weights, masks, the
// dropout mask's keying by step, and the bad shapes.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/errors.h"
#include "kernels/cpu/onednn/onednn.h"
#include "models/net.h"
#include "tests/layer_check.h"
#include "tests/seq_test_util.h"

using namespace dlb;
using namespace dlb::models;
using layertest::expect_ok;
using layertest::gradcheck;
using cpu::seq::RnnCell;

namespace {
std::vector<std::int32_t> tokens(std::size_t n, int vocab, std::uint64_t seed) {
  std::vector<std::int32_t> t(n);
  for (std::size_t i = 0; i < n; ++i) t[i] = std::int32_t((i * 2654435761u + seed * 97) % std::uint64_t(vocab));
  if (n > 2) t[n - 1] = t[0];  // a repeated token: its rows' gradients sum
  return t;
}
}  // namespace

// Token ids as input 0 (integer), a loss at every position; the table's gradient scatter-added.
TEST(SeqLayers, EmbeddingEveryPosition) {
  const int n = 3, T = 4, V = 9, C = 5;
  Model m("emb", {1, T}, LossKind::cross_entropy, true);
  m.add<Embedding>("embedding", V, C).add<Linear>("fc", C, 6);
  EXPECT_EQ(m.output_shape(n), (Shape{n, T, 6}));
  const auto ids = tokens(std::size_t(n) * T, V, 1);
  seqtest::each_isa([&] { expect_ok(gradcheck(m, n, true, 7, 1e-6, {ids.data()})); });
}

// TransformerLM embeds src and tgt with one table: a second Embedding borrows the first's weight;
// the model lists it once and its gradient is the sum of both lookups.
TEST(SeqLayers, EmbeddingTiedBetweenTwoInputs) {
  const int n = 2, T = 3, V = 7, C = 4;
  Model m("tied", {1, T}, LossKind::cross_entropy, true);
  const int tgt = m.add_input({1, T}, true);
  auto src_emb = std::make_unique<Embedding>("embedding", V, C);
  Embedding* owner = src_emb.get();
  const int a = m.node(std::move(src_emb), {0});
  const int b = m.node(std::make_unique<Embedding>(owner), {tgt});
  m.node<Linear>({m.node<Add>({a, b})}, "fc", C, 5);
  EXPECT_EQ(m.params().size(), 3u);
  const auto s = tokens(std::size_t(n) * T, V, 2), t = tokens(std::size_t(n) * T, V, 3);
  expect_ok(gradcheck(m, n, true, 7, 1e-6, {s.data(), t.data()}));
  auto c = m.clone();
  EXPECT_EQ(c->params().size(), 3u);
  EXPECT_EQ(&dynamic_cast<Embedding*>(c->layers()[1])->weight(), &dynamic_cast<Embedding*>(c->layers()[0])->weight());
}

TEST(SeqLayers, EmbeddingTokenOutsideVocabularyIsInputError) {
  Model m("emb", {1, 2}, LossKind::cross_entropy, true);
  m.add<Embedding>("embedding", 4, 3);
  const std::vector<std::int32_t> ids{1, 4};
  const void* in[] = {ids.data()};
  Batch b;
  b.n = 1, b.inputs = in;
  EXPECT_THROW(m.predict(b), InputError);
}

// nn.RNN as the seed's RNNClassifier uses it: sequence-first ([T, n, I] in memory), the last step
// (its hn) into a classifier.
TEST(SeqLayers, RnnTanhSequenceFirstLastStep) {
  const int n = 3, T = 5, I = 4, H = 6;
  Model m("rnn", {1, T, I}, LossKind::cross_entropy);
  m.add<Recurrent>("rnn", RnnCell::tanh, I, H).add<SelectStep>(-1, true).add<Linear>("fc", H, 3);
  EXPECT_EQ(m.output_shape(n), (Shape{n, 3}));
  seqtest::each_isa([&] { expect_ok(gradcheck(m, n, true)); });
}

// nn.LSTM as LSTMGenerator uses it: two layers, batch_first, h0 and c0 given ([n, layers, H]).
TEST(SeqLayers, LstmTwoLayersBatchFirstWithState) {
  const int n = 2, T = 4, I = 3, H = 5, L = 2;
  Model m("lstm", {1, T, I}, LossKind::cross_entropy);
  const int h0 = m.add_input({1, L, H}), c0 = m.add_input({1, L, H});
  const int y = m.node<Recurrent>({0, h0, c0}, "lstm", RnnCell::lstm, I, H, L, true, true);
  m.node<Linear>({m.node<SelectStep>({y}, -1)}, "fc", H, 4);
  EXPECT_EQ(m.params().size(), 10u);  // 4 per layer + fc
  std::vector<float> s0(std::size_t(n) * L * H), s1(s0.size());
  fill_uniform(s0.data(), s0.size(), 5);
  fill_uniform(s1.data(), s1.size(), 6);
  seqtest::each_isa([&] { expect_ok(gradcheck(m, n, true, 7, 1e-6, {s0.data(), s1.data()})); });
}

// Every position read (MSE over [n, T, H]), three stacked layers, sequence-first.
TEST(SeqLayers, LstmThreeLayersSequenceFirstEveryStep) {
  Model m("lstm", {1, 3, 4}, LossKind::mse);
  m.add<Recurrent>("lstm", RnnCell::lstm, 4, 3, 3, false);
  expect_ok(gradcheck(m, 2));
}

// The initial states' gradients: h0 and c0 made by a layer (one value read twice by the LSTM, its
// gradient the sum of both), against the reference.
TEST(SeqLayers, LstmStateGradients) {
  const int n = 2, I = 2, H = 3, L = 2;
  Model m("lstm", {1, L, I}, LossKind::mse);  // [n, 2, I]: the input's two steps make [n, layers, H]
  const int st = m.node<Linear>({0}, "init", I, H);
  const int x = m.node<Linear>({0}, "proj", I, I);
  m.node<Recurrent>({x, st, st}, "lstm", RnnCell::lstm, I, H, L, true, true);
  expect_ok(gradcheck(m, n));
}

TEST(SeqLayers, RecurrentOnednnMatchesReference) {
  if (!cpu::onednn::available()) GTEST_SKIP() << "built without oneDNN: " << cpu::onednn::unavailable_reason();
  for (RnnCell cell : {RnnCell::tanh, RnnCell::lstm})
    for (bool bf : {false, true}) {
      SCOPED_TRACE(std::string(cell == RnnCell::lstm ? "lstm" : "tanh") + (bf ? " batch_first" : " seq-first"));
      Model m("rnn", {1, 4, 3}, LossKind::mse);
      auto r = std::make_unique<Recurrent>("rnn", cell, 3, 5, 2, bf);
      r->impl = RnnImpl::onednn;
      m.add(std::move(r));
      expect_ok(gradcheck(m, 3));
    }
}

// impl cudnn is cuDNN's RNN API, the CUDA sequence trainer's: the CPU step refuses it.
TEST(SeqLayers, RecurrentCudnnIsGpuOnly) {
  EXPECT_EQ(parse_rnn_impl("cudnn"), RnnImpl::cudnn);
  EXPECT_STREQ(rnn_impl_name(RnnImpl::cudnn), "cudnn");
  EXPECT_THROW(parse_rnn_impl("cuda"), UsageError);
  Model m("rnn", {1, 4, 3}, LossKind::mse);
  auto r = std::make_unique<Recurrent>("rnn", RnnCell::lstm, 3, 5);
  r->impl = RnnImpl::cudnn;
  m.add(std::move(r));
  m.init(1);
  std::vector<float> x(2 * 4 * 3, 0.5f);
  EXPECT_THROW(m.forward_backward(Batch{x.data(), nullptr, nullptr, 2}), Unsupported);
}

TEST(SeqLayers, LayerNormBetweenLinears) {
  Model m("ln", {1, 3, 6}, LossKind::cross_entropy);
  m.add<Linear>("fc1", 6, 8).add<LayerNorm>("norm", 8).add<Linear>("fc2", 8, 4);
  seqtest::each_isa([&] { expect_ok(gradcheck(m, 2, true)); });
}

// Dropout: the mask is fixed within a step (reference and fp32 draw the same), another step draws
// another, evaluation passes the input through.
TEST(SeqLayers, DropoutKeyedByStep) {
  Model m("drop", {1, 40}, LossKind::cross_entropy);
  m.add<Linear>("fc1", 40, 64).add<Dropout>(0.3f, 1).add<Linear>("fc2", 64, 5);
  m.set_step(true, 3);
  expect_ok(gradcheck(m, 3, true));
  std::vector<float> x(3 * 40);
  fill_uniform(x.data(), x.size(), 9);
  const auto y3 = m.predict(x.data(), 3);
  m.set_step(true, 4);
  const auto y4 = m.predict(x.data(), 3);
  EXPECT_NE(y3, y4);
  m.set_step(true, 3);
  EXPECT_EQ(m.predict(x.data(), 3), y3);
  // evaluation: Dropout is the identity, so the output is the model without it
  m.set_step(false, 3);
  const auto ye = m.predict(x.data(), 3);
  Model plain("plain", {1, 40}, LossKind::cross_entropy);
  plain.add<Linear>("fc1", 40, 64).add<Linear>("fc2", 64, 5);
  plain.copy_params_from(m);
  EXPECT_EQ(plain.predict(x.data(), 3), ye);
}

TEST(SeqLayers, PositionalEncodingAndItsMaximum) {
  Model m("pe", {1, 5, 6}, LossKind::cross_entropy);
  m.add<Linear>("fc1", 6, 8).add<PositionalEncoding>(8, 5).add<Linear>("fc2", 8, 3);
  expect_ok(gradcheck(m, 2, true));
  const PositionalEncoding pe(8, 5);
  EXPECT_DOUBLE_EQ(pe.pe[0], 0.0);              // sin(0)
  EXPECT_DOUBLE_EQ(pe.pe[1], 1.0);              // cos(0)
  EXPECT_NEAR(pe.pe[8 + 2], std::sin(1.0 / 10.0), 1e-15);  // t 1, i 2: 1 / 10000^(2/8)
  Model big("pe", {1, 6, 8}, LossKind::mse);
  big.add<PositionalEncoding>(8, 5);
  EXPECT_THROW(big.output_shape(1), InputError);
}

// Self-attention with PyTorch's packing, each algorithm, with and without the causal mask, and with
// attention dropout (the unfused algorithm draws it).
TEST(SeqLayers, SelfAttentionAlgorithmsAndMasks) {
  const int n = 2, T = 5, E = 8;
  for (const char* algo : {"unfused", "flash"})
    for (bool causal : {false, true}) {
      SCOPED_TRACE(std::string(algo) + (causal ? " causal" : " full"));
      Model m("mha", {1, T, E}, LossKind::cross_entropy);
      MultiheadAttention::Options o;
      o.causal = causal;
      auto a = std::make_unique<MultiheadAttention>("self_attn", E, 2, o);
      a->algo = algo;
      m.add(std::move(a)).add<Linear>("fc", E, 3);
      seqtest::each_isa([&] { expect_ok(gradcheck(m, n, true)); });
    }
  Model m("mha", {1, T, E}, LossKind::cross_entropy);
  MultiheadAttention::Options o;
  o.dropout = 0.25f, o.stream = 4;
  m.add<MultiheadAttention>("self_attn", E, 4, o).add<Linear>("fc", E, 3);
  m.set_step(true, 2);
  expect_ok(gradcheck(m, n, true));
}

// Cross-attention (the decoder reading the encoder's memory): a query and a memory of another length,
// both getting gradients.
TEST(SeqLayers, CrossAttentionQueryAndMemory) {
  const int n = 2, Tq = 3, Tk = 5, E = 6;
  Model m("cross", {1, Tq, E}, LossKind::cross_entropy);
  const int mem_in = m.add_input({1, Tk, E});
  const int mem = m.node<Linear>({mem_in}, "mem", E, E);
  const int q = m.node<Linear>({0}, "q", E, E);
  MultiheadAttention::Options o;
  o.cross = true;
  m.node<Linear>({m.node<MultiheadAttention>({q, mem}, "multihead_attn", E, 3, o)}, "fc", E, 4);
  std::vector<float> memory(std::size_t(n) * Tk * E);
  fill_uniform(memory.data(), memory.size(), 12);
  expect_ok(gradcheck(m, n, true, 7, 1e-6, {memory.data()}));
}

// The core alone over a packed QKV (GPT-2's c_attn -> attention -> c_proj), causal.
TEST(SeqLayers, AttentionCoreOnPackedQkv) {
  const int T = 4, E = 8;
  Model m("core", {1, T, E}, LossKind::cross_entropy);
  MultiheadAttention::Options o;
  o.causal = true, o.projections = false;
  m.add<Linear>("c_attn", E, 3 * E).add<MultiheadAttention>("attn", E, 2, o).add<Linear>("c_proj", E, 5);
  EXPECT_EQ(m.params().size(), 4u);
  expect_ok(gradcheck(m, 2, true));
}

TEST(SeqLayers, BadShapesAreInputErrors) {
  EXPECT_THROW(MultiheadAttention("a", 10, 3, {}), InputError);  // 10 % 3
  Recurrent r("rnn", RnnCell::lstm, 4, 5);
  EXPECT_THROW(r.out_shape(Shape{2, 3, 5}), InputError);
  SelectStep s(4);
  EXPECT_THROW(s.out_shape(Shape{2, 3, 5}), InputError);
  LayerNorm ln("norm", 4);
  EXPECT_THROW(ln.out_shape(Shape{2, 3}), InputError);
}
