// The gpt2 K/V-cache decoders' shared checks (models/gpt2_decode.h), run on the CPU by
// test_gpt2_decode.cpp and on a GPU by test_gpt2_decode_gpu.cu: the logits of a prefill and of each
// position decoded one token at a time equal the full CPU forward's at that position (fp32
// tolerance); a multi-token feed after a prefix; bad use refused.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/common/errors.h"
#include "models/gpt2.h"
#include "models/gpt2_decode.h"

namespace gpt2_decode_check {

using namespace dlb;
using namespace dlb::models;

inline Gpt2Config small() {
  Gpt2Config c;
  c.name = "small", c.max_seq_len = 16, c.vocab_size = 37, c.padded_vocab_size = 40, c.num_layers = 2;
  c.num_heads = 4, c.channels = 32;
  return c;
}

// The full forward's logits of the T tokens, [T, V].
inline std::vector<float> full_logits(Model& m, const std::vector<std::int32_t>& tokens) {
  std::vector<std::int32_t> labels(tokens.size(), 0);
  const void* in[1] = {tokens.data()};
  Batch b;
  b.n = 1, b.labels = labels.data(), b.inputs = in;
  return m.predict(b);
}

inline double max_diff(const float* a, const float* b, std::size_t n) {
  double d = 0;
  for (std::size_t i = 0; i < n; ++i) d = std::max(d, double(std::abs(a[i] - b[i])));
  return d;
}

// fp32 both ways, summed in other orders (sgemv / cuBLAS, our softmax and LayerNorm): ~1e-6 of the
// logits' scale; 1e-5 leaves room while a wrong position or head is off by 1e-1.
inline void cached_logits_equal_the_full_forward(const std::string& device) {
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

  auto d = make_gpt2_decoder(*m, c, T, device);
  d->feed(tokens.data(), prompt, true);  // prefill: every position's logits
  const std::vector<float> pre = d->logits();
  ASSERT_EQ(pre.size(), std::size_t(prompt) * V);
  EXPECT_LT(max_diff(pre.data(), want.data(), pre.size()), tol);
  for (int t = prompt; t < T; ++t) {  // then one token at a time
    d->feed(&tokens[std::size_t(t)], 1, false);
    const auto& got = d->logits();
    ASSERT_EQ(got.size(), std::size_t(V));
    EXPECT_LT(max_diff(got.data(), want.data() + std::size_t(t) * V, std::size_t(V)), tol) << "position " << t;
  }
  EXPECT_EQ(d->position(), T);
  EXPECT_THROW(d->feed(tokens.data(), 1, false), UsageError);  // the cache is full

  d->reset();  // from the first token, one at a time; then 4 tokens after that prefix, every row
  for (int t = 0; t < 3; ++t) {
    d->feed(&tokens[std::size_t(t)], 1, false);
    const auto& got = d->logits();
    EXPECT_LT(max_diff(got.data(), want.data() + std::size_t(t) * V, std::size_t(V)), tol) << "position " << t;
  }
  d->feed(&tokens[3], 4, true);
  const auto& rows = d->logits();
  ASSERT_EQ(rows.size(), std::size_t(4) * V);
  EXPECT_LT(max_diff(rows.data(), want.data() + std::size_t(3) * V, rows.size()), tol);
  d->feed(&tokens[7], 2, false);  // and a feed's last row alone
  const auto& last = d->logits();
  ASSERT_EQ(last.size(), std::size_t(V));
  EXPECT_LT(max_diff(last.data(), want.data() + std::size_t(8) * V, std::size_t(V)), tol);
}

inline void bad_use_is_refused(const std::string& device) {
  const Gpt2Config c = small();
  auto m = make_gpt2(gpt2_random_weights(c, 1), 4);
  EXPECT_THROW(make_gpt2_decoder(*m, c, 17, device), InputError);  // past max_seq_len
  auto d = make_gpt2_decoder(*m, c, 4, device);
  const std::int32_t bad[1] = {37};
  EXPECT_THROW(d->feed(bad, 1, false), UsageError);
  EXPECT_THROW(d->feed(bad, 0, false), UsageError);
  EXPECT_EQ(d->position(), 0);
  EXPECT_EQ(d->cache_bytes(), 2 * sizeof(float) * 2 * 4 * 32);
}

}  // namespace gpt2_decode_check
