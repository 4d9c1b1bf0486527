// The gpt2 K/V-cache decoder (models/gpt2_decode.h): the logits of a prefill and of each position
// decoded one token at a time equal the full forward's at that position (fp32 tolerance), for a
// prefill and for decoding from the first token; bad use is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "kernels/common/errors.h"
#include "models/gpt2.h"
#include "models/gpt2_decode.h"

using namespace dlb;
using namespace dlb::models;

namespace {
Gpt2Config small() {
  Gpt2Config c;
  c.name = "small", c.max_seq_len = 16, c.vocab_size = 37, c.padded_vocab_size = 40, c.num_layers = 2;
  c.num_heads = 4, c.channels = 32;
  return c;
}

// The full forward's logits of the T tokens, [T, V].
std::vector<float> full_logits(Model& m, const std::vector<std::int32_t>& tokens) {
  std::vector<std::int32_t> labels(tokens.size(), 0);
  const void* in[1] = {tokens.data()};
  Batch b;
  b.n = 1, b.labels = labels.data(), b.inputs = in;
  return m.predict(b);
}

double max_diff(const float* a, const float* b, std::size_t n) {
  double d = 0;
  for (std::size_t i = 0; i < n; ++i) d = std::max(d, double(std::abs(a[i] - b[i])));
  return d;
}
}  // namespace

TEST(Gpt2Decode, CachedLogitsEqualTheFullForward) {
  const Gpt2Config c = small();
  const int T = 12, prompt = 5, V = c.vocab_size;
  const Gpt2Weights w = gpt2_random_weights(c, 7);
  auto m = make_gpt2(w, T);
  std::vector<std::int32_t> tokens;
  for (std::uint16_t t : gpt2_random_tokens(T, V, 8)) tokens.push_back(t);
  const std::vector<float> want = full_logits(*m, tokens);
  double scale = 0;
  for (float v : want) scale = std::max(scale, double(std::abs(v)));
  ASSERT_GT(scale, 1e-3);
  const double tol = 1e-5 * scale;

  Gpt2Decoder d(*m, c, T);
  const std::vector<float> pre = d.feed(tokens.data(), prompt, true);  // prefill: every position's logits
  ASSERT_EQ(pre.size(), std::size_t(prompt) * V);
  EXPECT_LT(max_diff(pre.data(), want.data(), pre.size()), tol);
  for (int t = prompt; t < T; ++t) {  // then one token at a time
    const auto& got = d.feed(&tokens[std::size_t(t)], 1, false);
    ASSERT_EQ(got.size(), std::size_t(V));
    EXPECT_LT(max_diff(got.data(), want.data() + std::size_t(t) * V, std::size_t(V)), tol) << "position " << t;
  }
  EXPECT_EQ(d.position(), T);
  EXPECT_THROW(d.feed(tokens.data(), 1, false), UsageError);  // the cache is full

  d.reset();  // from the first token, one at a time; and a prefill's last row alone
  for (int t = 0; t < 3; ++t) {
    const auto& got = d.feed(&tokens[std::size_t(t)], 1, false);
    EXPECT_LT(max_diff(got.data(), want.data() + std::size_t(t) * V, std::size_t(V)), tol) << "position " << t;
  }
  const auto& last = d.feed(&tokens[3], 4, false);
  ASSERT_EQ(last.size(), std::size_t(V));
  EXPECT_LT(max_diff(last.data(), want.data() + std::size_t(6) * V, std::size_t(V)), tol);
}

TEST(Gpt2Decode, BadUseIsRefused) {
  const Gpt2Config c = small();
  auto m = make_gpt2(gpt2_random_weights(c, 1), 4);
  EXPECT_THROW(Gpt2Decoder(*m, c, 17), InputError);  // past max_seq_len
  Gpt2Decoder d(*m, c, 4);
  const std::int32_t bad[1] = {37};
  EXPECT_THROW(d.feed(bad, 1, false), UsageError);
  EXPECT_THROW(d.feed(bad, 0, false), UsageError);
  EXPECT_EQ(d.cache_bytes(), 2 * sizeof(float) * 2 * 4 * 32);
}
