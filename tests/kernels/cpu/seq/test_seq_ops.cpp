// The row and elementwise kernels of the sequence models (kernels/cpu/seq/: softmax, the fused
// classifier, LayerNorm, GELU, Philox dropout, embedding, AdamW): each fp64 reference gradchecked
// by central differences, each fast fp32 kernel against its reference at every ISA level the CPU
// runs, and the threaded split against one thread, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/common/errors.h"
#include "kernels/common/philox.h"
#include "kernels/common/verify.h"
#include "kernels/cpu/nn_ops.h"
#include "kernels/cpu/seq/adamw.h"
#include "kernels/cpu/seq/dropout.h"
#include "kernels/cpu/seq/embedding.h"
#include "kernels/cpu/seq/gelu.h"
#include "kernels/cpu/seq/layernorm.h"
#include "kernels/cpu/seq/softmax.h"
#include "kernels/cpu/threads.h"
#include "tests/seq_test_util.h"

using namespace dlb;
using namespace dlb::cpu::seq;
using namespace seqtest;

namespace {
const double kTol = default_tolerance(DType::fp32);

template <class F>
std::vector<float> one_thread(F&& f) {
  cpu::KernelThreadsLimit one(1);
  return f();
}
}  // namespace

TEST(SeqSoftmax, ReferenceGradcheck) {
  for (int causal : {0, 5}) {
    const long rows = 10;
    const int cols = 7;
    auto x = to_d(rand_f(rows * cols, 1, 3.f)), r = to_d(rand_f(rows * cols, 2));
    std::vector<double> y(x.size()), dx(x.size());
    softmax_forward_ref(x.data(), y.data(), rows, cols, causal);
    softmax_backward_ref(y.data(), r.data(), dx.data(), rows, cols, causal);
    auto loss = [&] {
      std::vector<double> yy(x.size());
      softmax_forward_ref(x.data(), yy.data(), rows, cols, causal);
      return dot(yy, r);
    };
    EXPECT_LT(gradcheck(x, dx, loss, 1000), kFdTol) << "causal " << causal;
    if (causal) {
      EXPECT_EQ(y[1], 0.0);  // row 0 sees column 0 only
    }
  }
}

TEST(SeqSoftmax, FastMatchesReferenceAtEveryIsa) {
  for (int cols : {1, 5, 16, 37, 200})
    for (int causal : {0, 3}) {
      const long rows = 24;
      const auto x = rand_f(rows * cols, 3, 8.f), dy = rand_f(rows * cols, 4);
      std::vector<double> ry(x.size()), rdx(x.size());
      softmax_forward_ref(to_d(x).data(), ry.data(), rows, cols, causal);
      std::vector<float> yr(ry.begin(), ry.end());
      softmax_backward_ref(ry.data(), to_d(dy).data(), rdx.data(), rows, cols, causal);
      each_isa([&] {
        std::vector<float> y(x.size(), NAN), dx(x.size(), NAN);
        softmax_forward(x.data(), y.data(), rows, cols, causal);
        softmax_backward(yr.data(), dy.data(), dx.data(), rows, cols, causal);
        EXPECT_LT(max_rel_err(y.data(), ry.data(), y.size()), kTol) << "cols " << cols << " causal " << causal;
        EXPECT_LT(max_rel_err(dx.data(), rdx.data(), dx.size()), kTol) << "cols " << cols << " causal " << causal;
      });
    }
}

TEST(SeqSoftmax, ThreadsGiveTheSameBits) {
  const long rows = 512;
  const int cols = 300;
  const auto x = rand_f(rows * cols, 5, 4.f);
  auto run = [&] {
    std::vector<float> y(x.size());
    softmax_forward(x.data(), y.data(), rows, cols, 100);
    return y;
  };
  EXPECT_EQ(run(), one_thread(run));
}

TEST(SeqClassifier, ReferenceGradcheckAndIgnoredRows) {
  const long rows = 6;
  const int V = 9, ld = 12;
  auto x = to_d(rand_f(rows * ld, 6, 3.f));
  std::vector<int> t = {0, 8, -100, 4, 4, 2};
  std::vector<double> d(x.size()), losses(rows);
  const double l = classifier_forward_backward_ref(x.data(), t.data(), rows, V, ld, losses.data(), d.data());
  EXPECT_EQ(losses[2], 0.0);
  EXPECT_NEAR(l, (losses[0] + losses[1] + losses[3] + losses[4] + losses[5]) / 5, 1e-12);
  for (int j = V; j < ld; ++j) EXPECT_EQ(d[j], 0.0);
  auto loss = [&] { return classifier_forward_backward_ref(x.data(), t.data(), rows, V, ld, nullptr, nullptr); };
  EXPECT_LT(gradcheck(x, d, loss, 1000), kFdTol);
  t[1] = V;
  EXPECT_THROW(classifier_forward_backward_ref(x.data(), t.data(), rows, V, ld, nullptr, nullptr),
               std::invalid_argument);
}

TEST(SeqClassifier, FastMatchesReferenceAtEveryIsaInPlaceToo) {
  const long rows = 33;
  const int V = 1000, ld = 1008;
  const auto x = rand_f(rows * ld, 7, 6.f);
  std::vector<int> t(rows);
  for (long r = 0; r < rows; ++r) t[r] = r == 5 ? -100 : int((r * 131) % V);
  std::vector<double> rd(x.size()), rl(rows);
  const double rloss = classifier_forward_backward_ref(to_d(x).data(), t.data(), rows, V, ld, rl.data(), rd.data());
  each_isa([&] {
    std::vector<float> d(x.size(), NAN), l(rows, NAN);
    const float loss = classifier_forward_backward(x.data(), t.data(), rows, V, ld, l.data(), d.data());
    EXPECT_NEAR(loss, rloss, kTol * rloss);
    EXPECT_LT(max_rel_err(l.data(), rl.data(), rows), kTol);
    EXPECT_LT(max_rel_err(d.data(), rd.data(), d.size()), kTol);
    std::vector<float> inplace = x;  // dlogits over the logits, as llm.c's fused classifier
    const float loss2 = classifier_forward_backward(inplace.data(), t.data(), rows, V, ld, nullptr, inplace.data());
    EXPECT_EQ(loss, loss2);
    EXPECT_EQ(d, inplace);
  });
}

TEST(SeqLayerNorm, ReferenceGradcheck) {
  const long rows = 5;
  const int C = 11;
  auto x = to_d(rand_f(rows * C, 8, 2.f)), w = to_d(rand_f(C, 9)), b = to_d(rand_f(C, 10)),
       r = to_d(rand_f(rows * C, 11));
  std::vector<double> y(x.size()), dx(x.size()), dw(C), db(C);
  layernorm_backward_ref(r.data(), x.data(), w.data(), dx.data(), dw.data(), db.data(), rows, C);
  auto loss = [&] {
    layernorm_forward_ref(x.data(), w.data(), b.data(), y.data(), rows, C);
    return dot(y, r);
  };
  EXPECT_LT(gradcheck(x, dx, loss, 1000), kFdTol);
  EXPECT_LT(gradcheck(w, dw, loss, 1000), kFdTol);
  EXPECT_LT(gradcheck(b, db, loss, 1000), kFdTol);
}

TEST(SeqLayerNorm, FastMatchesReferenceAtEveryIsa) {
  // (C of 1 or 2 is ill-conditioned: rstd is large where a row's values nearly agree)
  for (int C : {7, 16, 77, 384})
    for (bool affine : {true, false}) {
      const long rows = 70;  // three chunks of the dw/db partial sums
      const auto x = rand_f(rows * C, 12, 3.f), w = rand_f(C, 13), b = rand_f(C, 14), dy = rand_f(rows * C, 15);
      const auto xd = to_d(x), wd = to_d(w), bd = to_d(b);
      std::vector<double> ry(x.size()), rdx(x.size()), rdw(C), rdb(C);
      layernorm_forward_ref(xd.data(), affine ? wd.data() : nullptr, affine ? bd.data() : nullptr, ry.data(), rows, C);
      layernorm_backward_ref(to_d(dy).data(), xd.data(), affine ? wd.data() : nullptr, rdx.data(), rdw.data(),
                             rdb.data(), rows, C);
      each_isa([&] {
        std::vector<float> y(x.size(), NAN), mean(rows), rstd(rows), dx(x.size(), NAN), dw(C, NAN), db(C, NAN);
        const float* wp = affine ? w.data() : nullptr;
        layernorm_forward(x.data(), wp, affine ? b.data() : nullptr, y.data(), mean.data(), rstd.data(), rows, C);
        layernorm_backward(dy.data(), x.data(), wp, mean.data(), rstd.data(), dx.data(), dw.data(), db.data(), rows, C);
        SCOPED_TRACE("C " + std::to_string(C) + (affine ? " affine" : ""));
        EXPECT_LT(max_rel_err(y.data(), ry.data(), y.size()), kTol);
        EXPECT_LT(max_rel_err(dx.data(), rdx.data(), dx.size()), kTol);
        EXPECT_LT(max_rel_err(dw.data(), rdw.data(), C), kTol);
        EXPECT_LT(max_rel_err(db.data(), rdb.data(), C), kTol);
      });
    }
}

TEST(SeqLayerNorm, ThreadsGiveTheSameBits) {
  const long rows = 1000;
  const int C = 96;
  const auto x = rand_f(rows * C, 16), w = rand_f(C, 17), dy = rand_f(rows * C, 18);
  auto run = [&] {
    std::vector<float> y(x.size()), mean(rows), rstd(rows), out(x.size() + 2 * C);
    layernorm_forward(x.data(), w.data(), nullptr, y.data(), mean.data(), rstd.data(), rows, C);
    layernorm_backward(dy.data(), x.data(), w.data(), mean.data(), rstd.data(), out.data(), out.data() + x.size(),
                       out.data() + x.size() + C, rows, C);
    return out;
  };
  EXPECT_EQ(run(), one_thread(run));
}

TEST(SeqGelu, ReferenceGradcheckAndFastAtEveryIsa) {
  auto x = to_d(rand_f(40, 19, 4.f)), r = to_d(rand_f(40, 20));
  std::vector<double> y(x.size()), dx(x.size());
  gelu_backward_ref(x.data(), r.data(), dx.data(), x.size());
  auto loss = [&] {
    gelu_forward_ref(x.data(), y.data(), x.size());
    return dot(y, r);
  };
  EXPECT_LT(gradcheck(x, dx, loss, 1000), kFdTol);

  const std::size_t n = 1001;  // a tail on every width
  const auto xf = rand_f(n, 21, 6.f), dy = rand_f(n, 22);
  std::vector<double> ry(n), rdx(n);
  gelu_forward_ref(to_d(xf).data(), ry.data(), n);
  gelu_backward_ref(to_d(xf).data(), to_d(dy).data(), rdx.data(), n);
  each_isa([&] {
    std::vector<float> yf(n, NAN), dxf = dy;
    gelu_forward(xf.data(), yf.data(), n);
    gelu_backward(xf.data(), dxf.data(), dxf.data(), n);  // in place over dy
    EXPECT_LT(max_rel_err(yf.data(), ry.data(), n), kTol);
    EXPECT_LT(max_rel_err(dxf.data(), rdx.data(), n), kTol);
  });
}

// Random123's known-answer vectors for philox4x32_10.
TEST(SeqDropout, PhiloxKnownAnswers) {
  Philox4 r = philox4x32_10(Philox4{{0, 0, 0, 0}}, 0, 0);
  EXPECT_EQ(r.v[0], 0x6627e8d5u);
  EXPECT_EQ(r.v[1], 0xe169c58du);
  EXPECT_EQ(r.v[2], 0xbc57ac4cu);
  EXPECT_EQ(r.v[3], 0x9b00dbd8u);
  r = philox4x32_10(Philox4{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu, 0xffffffffu);
  EXPECT_EQ(r.v[0], 0x408f276du);
  EXPECT_EQ(r.v[1], 0x41c83b0eu);
  EXPECT_EQ(r.v[2], 0xa20bc7c6u);
  EXPECT_EQ(r.v[3], 0x6d5451fdu);
  r = philox4x32_10(Philox4{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u);
  EXPECT_EQ(r.v[0], 0xd16cfe09u);
  EXPECT_EQ(r.v[1], 0x94fdccebu);
  EXPECT_EQ(r.v[2], 0x5001e420u);
  EXPECT_EQ(r.v[3], 0x24126ea1u);
}

TEST(SeqDropout, MaskIsTheReferenceAtAnyOffsetAndIsa) {
  const float p = 0.3f;
  const std::uint64_t seed = 0x1234abcd5678ull;
  for (std::uint64_t offset : {0ull, 1ull, 3ull, 4ull, 1000003ull})
    for (std::size_t n : {1ul, 3ul, 5ul, 4099ul}) {
      const auto x = rand_f(n, 23);
      std::vector<std::uint8_t> ref(n);
      dropout_mask_ref(ref.data(), n, p, seed, offset);
      each_isa([&] {
        std::vector<float> y(n, NAN), dx(n, NAN);
        std::vector<std::uint8_t> mask(n, 7);
        dropout_forward(x.data(), y.data(), mask.data(), n, p, seed, offset);
        dropout_backward(x.data(), dx.data(), n, p, seed, offset);
        ASSERT_EQ(mask, ref) << "offset " << offset << " n " << n;
        for (std::size_t i = 0; i < n; ++i) {
          ASSERT_EQ(y[i], ref[i] ? x[i] * (1.f / (1.f - p)) : 0.f);
          ASSERT_EQ(dx[i], y[i]);  // backward regenerates the same mask
        }
      });
    }
  // The rate: 1e5 draws at p = 0.3 keep 70% +- 0.5% (~3.4 sigma); a call is a slice of the stream.
  const std::size_t n = 100000;
  std::vector<std::uint8_t> m(n), tail(n - 17);
  dropout_mask_ref(m.data(), n, p, seed, 0);
  long kept = 0;
  for (auto v : m) kept += v;
  EXPECT_NEAR(double(kept) / n, 0.7, 0.005);
  dropout_mask_ref(tail.data(), tail.size(), p, seed, 17);
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), m.begin() + 17));
  std::vector<float> ones(n, 1.f), y(n);
  dropout_forward(ones.data(), y.data(), nullptr, n, 0.f, seed, 0);
  EXPECT_EQ(y, ones);  // p = 0: identity
  dropout_forward(ones.data(), y.data(), nullptr, n, 1.f, seed, 0);
  EXPECT_EQ(y, std::vector<float>(n, 0.f));  // p = 1: all dropped
}

// ReLU + dropout in one pass is relu_forward then dropout_forward, bit for bit, at every ISA level
// and offset (the mask from the same (seed, offset)); its backward from y alone is dropout_backward
// then relu_backward. Zeros, negatives and a NaN in x (relu: NaN -> 0) included.
TEST(SeqDropout, ReluDropoutIsReluThenDropoutBitForBit) {
  const std::uint64_t seed = 0x5eed0f00dull;
  for (float p : {0.f, 0.1f, 0.5f})
    for (std::uint64_t offset : {0ull, 5ull, 1000003ull})
      for (std::size_t n : {1ul, 17ul, 4099ul}) {
        auto x = rand_f(n, 29);
        const auto dy = rand_f(n, 31);
        x[0] = 0.f;
        if (n > 2) x[2] = NAN;
        const float scale = 1.f / (1.f - p);
        each_isa([&] {
          std::vector<float> r(n), want_y(n), d(n), want_dx(n), y(n, 7.f), dx(n, 7.f);
          cpu::relu_forward(x.data(), r.data(), n);
          dropout_forward(r.data(), want_y.data(), nullptr, n, p, seed, offset);
          dropout_backward(dy.data(), d.data(), n, p, seed, offset);
          cpu::relu_backward(r.data(), d.data(), want_dx.data(), n);
          relu_dropout_forward(x.data(), y.data(), n, p, seed, offset);
          relu_dropout_backward(y.data(), dy.data(), dx.data(), n, scale);
          for (std::size_t i = 0; i < n; ++i) {
            ASSERT_EQ(y[i], want_y[i]) << "p " << p << " offset " << offset << " i " << i;
            ASSERT_EQ(dx[i], want_dx[i]) << "p " << p << " offset " << offset << " i " << i;
          }
        });
      }
}

TEST(SeqEmbedding, ReferenceGradcheckAndFastAtEveryIsa) {
  const int B = 3, T = 5, V = 7, C = 70;
  std::vector<std::int32_t> tok = {0, 6, 2, 2, 5, 1, 1, 1, 0, 3, 6, 6, 2, 4, 0};
  auto w = to_d(rand_f(V * C, 24)), pos = to_d(rand_f(T * C, 25)), r = to_d(rand_f(B * T * C, 26));
  std::vector<double> y(B * T * C), dw(w.size(), 0.0), dpos(pos.size(), 0.0);
  embedding_backward_ref(tok.data(), B, T, r.data(), V, C, dw.data(), dpos.data());
  auto loss = [&] {
    embedding_forward_ref(tok.data(), B, T, w.data(), V, C, pos.data(), y.data());
    return dot(y, r);
  };
  EXPECT_LT(gradcheck(w, dw, loss, 1000), kFdTol);
  EXPECT_LT(gradcheck(pos, dpos, loss, 1000), kFdTol);

  const auto wf = rand_f(V * C, 24), pf = rand_f(T * C, 25), dy = rand_f(B * T * C, 26);
  std::vector<double> ry(B * T * C);
  embedding_forward_ref(tok.data(), B, T, to_d(wf).data(), V, C, to_d(pf).data(), ry.data());
  each_isa([&] {
    std::vector<float> yf(ry.size(), NAN), dwf(V * C, 1.f), dpf(T * C, 0.f);
    embedding_forward(tok.data(), B, T, wf.data(), V, C, pf.data(), yf.data());
    embedding_backward(tok.data(), B, T, dy.data(), V, C, dwf.data(), dpf.data());
    EXPECT_LT(max_rel_err(yf.data(), ry.data(), ry.size()), kTol);
    std::vector<double> want(dw.size(), 1.0);  // accumulated onto what dw held
    for (std::size_t i = 0; i < dw.size(); ++i) want[i] += dw[i];
    EXPECT_LT(max_rel_err(dwf.data(), want.data(), want.size()), kTol);
    EXPECT_LT(max_rel_err(dpf.data(), dpos.data(), dpos.size()), kTol);
  });
  tok[7] = V;
  std::vector<float> yf(B * T * C);
  try {
    embedding_forward(tok.data(), B, T, wf.data(), V, C, nullptr, yf.data());
    ADD_FAILURE() << "no error for a token outside the vocabulary";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("[1, 2]"), std::string::npos) << e.what();
  }
}

TEST(SeqEmbedding, ScatterAddIsDeterministicAcrossThreads) {
  const int B = 16, T = 64, V = 5, C = 768;  // few tokens, many repeats: order matters for the bits
  std::vector<std::int32_t> tok(B * T);
  for (int i = 0; i < B * T; ++i) tok[i] = (i * 7) % V;
  const auto dy = rand_f(std::size_t(B) * T * C, 27);
  auto run = [&] {
    std::vector<float> dw(V * C, 0.f);
    embedding_backward(tok.data(), B, T, dy.data(), V, C, dw.data(), nullptr);
    return dw;
  };
  EXPECT_EQ(run(), one_thread(run));
}

TEST(SeqAdamW, MatchesReferenceOverSteps) {
  const std::size_t n = 1003;
  const AdamW o{3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
  const auto p0 = rand_f(n, 28);
  each_isa([&] {
    std::vector<float> p = p0, m(n, 0.f), v(n, 0.f);
    std::vector<double> pr = to_d(p0), mr(n, 0.0), vr(n, 0.0);
    for (long step = 1; step <= 5; ++step) {
      const auto g = rand_f(n, 100 + step);
      adamw_step(p.data(), g.data(), m.data(), v.data(), n, o, step);
      adamw_step_ref(pr.data(), to_d(g).data(), mr.data(), vr.data(), n, o, step);
    }
    EXPECT_LT(max_rel_err(p.data(), pr.data(), n), kTol);
    EXPECT_LT(max_rel_err(m.data(), mr.data(), n), kTol);
    EXPECT_LT(max_rel_err(v.data(), vr.data(), n), kTol);
  });
  // The first step of Adam moves each weight by about lr (m/sqrt(v) = sign(g)), after the decay.
  std::vector<double> p{1.0}, g{0.5}, m{0.0}, v{0.0};
  adamw_step_ref(p.data(), g.data(), m.data(), v.data(), 1, o, 1);
  EXPECT_NEAR(p[0], 1.0 * (1 - 3e-3 * 0.1) - 3e-3, 1e-9);
}
