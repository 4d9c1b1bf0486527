// The recurrent layers (kernels/cpu/seq/rnn.h; oneDNN's in kernels/cpu/onednn/rnn.h): the fp64
// reference gradchecked by central differences in every input and parameter, the fast fp32 layer
// (small_gemm / OpenBLAS GEMMs + fused cells) against it at every ISA level the CPU runs, both
// layouts, with and without h0/c0 and biases, accumulating into the gradients, the bf16-GEMM variant
// (autocast) within bf16's tolerance at every level bf16_gemm has a path for, and oneDNN's
// vanilla_rnn / lstm primitives against the same reference.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "kernels/common/errors.h"
#include "kernels/common/verify.h"
#include "kernels/cpu/bf16_cast.h"
#include "kernels/cpu/onednn/onednn.h"
#include "kernels/cpu/onednn/rnn.h"
#include "kernels/cpu/seq/rnn.h"
#include "kernels/cpu/seq/small_gemm.h"
#include "kernels/cpu/threads.h"
#include "tests/seq_test_util.h"

using namespace dlb;
using namespace dlb::cpu::seq;
using namespace seqtest;

namespace {

// One layer's tensors in fp32 (scaled so the gates sit in their curved range) and fp64.
struct Case {
  RnnShape s;
  bool bias = true, init = true;  // biases present; h0 / c0 given
  std::vector<float> x, h0, c0, wih, whh, bih, bhh, dy, dhn, dcn;
  Case(RnnCell cell, int T, int B, int I, int H, bool bf, bool bias_ = true, bool init_ = true)
      : bias(bias_), init(init_) {
    s.cell = cell, s.T = T, s.B = B, s.I = I, s.H = H, s.batch_first = bf;
    const int GH = s.gates() * H;
    x = rand_f(s.rows() * I, 1), h0 = rand_f(B * H, 2, 0.5f), c0 = rand_f(B * H, 3, 0.5f);
    wih = rand_f(std::size_t(GH) * I, 4, 0.6f), whh = rand_f(std::size_t(GH) * H, 5, 0.6f);
    bih = rand_f(GH, 6, 0.3f), bhh = rand_f(GH, 7, 0.3f);
    dy = rand_f(s.rows() * H, 8), dhn = rand_f(B * H, 9), dcn = rand_f(B * H, 10);
  }
  std::string name() const {
    return std::string(s.cell == RnnCell::lstm ? "lstm" : "tanh") + " T" + std::to_string(s.T) + " B" +
           std::to_string(s.B) + " I" + std::to_string(s.I) + " H" + std::to_string(s.H) +
           (s.batch_first ? " batch_first" : "") + (bias ? "" : " no-bias") + (init ? "" : " no-h0");
  }
};

// Reference outputs and gradients (y, hn, cn, dx, dh0, dc0, dwih, dwhh, dbih, dbhh) of a case.
struct RefOut {
  std::vector<double> y, hn, cn, dx, dh0, dc0, dwih, dwhh, dbih, dbhh;
};
RefOut reference(const Case& c) {
  const RnnShape& s = c.s;
  const std::size_t GH = std::size_t(s.gates()) * s.H, BH = std::size_t(s.B) * s.H;
  RefOut r{std::vector<double>(s.rows() * s.H), std::vector<double>(BH), std::vector<double>(BH),
           std::vector<double>(s.rows() * s.I), std::vector<double>(BH), std::vector<double>(BH),
           std::vector<double>(GH * s.I), std::vector<double>(GH * s.H), std::vector<double>(GH),
           std::vector<double>(GH)};
  const auto x = to_d(c.x), h0 = to_d(c.h0), c0 = to_d(c.c0), wih = to_d(c.wih), whh = to_d(c.whh);
  const auto bih = to_d(c.bih), bhh = to_d(c.bhh), dy = to_d(c.dy), dhn = to_d(c.dhn), dcn = to_d(c.dcn);
  const RnnWeightsRef w{wih.data(), whh.data(), c.bias ? bih.data() : nullptr, c.bias ? bhh.data() : nullptr};
  const double* ph0 = c.init ? h0.data() : nullptr;
  const double* pc0 = c.init ? c0.data() : nullptr;
  rnn_forward_ref(s, w, x.data(), ph0, pc0, r.y.data(), r.hn.data(), r.cn.data());
  rnn_backward_ref(s, w, x.data(), ph0, pc0, dy.data(), dhn.data(), dcn.data(), r.dx.data(), r.dh0.data(),
                   r.dc0.data(), {r.dwih.data(), r.dwhh.data(), r.dbih.data(), r.dbhh.data()});
  return r;
}

// Fast outputs in the same order, from `forward` / `backward` of the implementation under test.
using Runner = std::function<void(const Case&, std::vector<std::vector<float>>&)>;

void run_ours(const Case& c, std::vector<std::vector<float>>& o) {
  const RnnShape& s = c.s;
  const RnnWeights w{c.wih.data(), c.whh.data(), c.bias ? c.bih.data() : nullptr, c.bias ? c.bhh.data() : nullptr};
  std::vector<float> saved;
  rnn_forward(s, w, c.x.data(), c.init ? c.h0.data() : nullptr, c.init ? c.c0.data() : nullptr, o[0].data(),
              o[1].data(), o[2].data(), saved);
  rnn_backward(s, w, c.x.data(), c.dy.data(), c.dhn.data(), c.dcn.data(), saved, o[3].data(), o[4].data(),
               o[5].data(), {o[6].data(), o[7].data(), o[8].data(), o[9].data()});
}

void run_onednn(const Case& c, std::vector<std::vector<float>>& o) {
  const RnnShape& s = c.s;
  const RnnWeights w{c.wih.data(), c.whh.data(), c.bias ? c.bih.data() : nullptr, c.bias ? c.bhh.data() : nullptr};
  cpu::onednn::RnnSaved saved;
  cpu::onednn::rnn_forward(s, w, c.x.data(), c.init ? c.h0.data() : nullptr, c.init ? c.c0.data() : nullptr,
                           o[0].data(), o[1].data(), o[2].data(), &saved);
  cpu::onednn::rnn_backward(s, w, c.x.data(), c.dy.data(), c.dhn.data(), c.dcn.data(), saved, o[3].data(),
                            o[4].data(), o[5].data(), {o[6].data(), o[7].data(), o[8].data(), o[9].data()});
}

void compare(const Case& c, const Runner& run, double tol) {
  const RefOut r = reference(c);
  const std::vector<double>* want[] = {&r.y, &r.hn, &r.cn, &r.dx, &r.dh0, &r.dc0, &r.dwih, &r.dwhh, &r.dbih, &r.dbhh};
  const char* names[] = {"y", "hn", "cn", "dx", "dh0", "dc0", "dW_ih", "dW_hh", "db_ih", "db_hh"};
  std::vector<std::vector<float>> o;
  for (auto* v : want) o.emplace_back(v->size(), NAN);
  run(c, o);
  const bool lstm = c.s.cell == RnnCell::lstm;
  for (int k = 0; k < 10; ++k) {
    if (!lstm && (k == 2 || k == 5)) continue;  // no cell state
    if (!c.bias && k >= 8) continue;
    EXPECT_LT(max_rel_err(o[k].data(), want[k]->data(), o[k].size()), tol) << c.name() << ": " << names[k];
  }
}

std::vector<Case> cases() {
  std::vector<Case> v;
  for (RnnCell cell : {RnnCell::tanh, RnnCell::lstm})
    for (bool bf : {false, true}) {
      v.emplace_back(cell, 5, 3, 7, 13, bf);             // H not a multiple of a vector
      v.emplace_back(cell, 9, 4, 32, 48, bf);            // whole vectors
      v.emplace_back(cell, 4, 1, 5, 20, bf, false, false);  // batch 1, no biases, zero h0 / c0
      v.emplace_back(cell, 3, 9, 6, 20, bf);             // small_gemm: a whole tile of rows and a remainder
      v.emplace_back(cell, 9, 120, 5, 8, bf);            // batch-row tasks; the weight gradients on small_gemm
      v.emplace_back(cell, 9, 240, 5, 8, bf);            // T B > kSmallGemmMaxK: the weight gradients on sgemm
      static_assert(9 * 120 <= kSmallGemmMaxK && 9 * 240 > kSmallGemmMaxK);
    }
  return v;
}

}  // namespace

TEST(SeqRnn, ReferenceGradcheck) {
  for (RnnCell cell : {RnnCell::tanh, RnnCell::lstm})
    for (bool bf : {false, true}) {
      Case c(cell, 4, 2, 3, 5, bf);
      const RnnShape& s = c.s;
      auto x = to_d(c.x), h0 = to_d(c.h0), c0 = to_d(c.c0), wih = to_d(c.wih), whh = to_d(c.whh);
      auto bih = to_d(c.bih), bhh = to_d(c.bhh);
      const auto ry = to_d(c.dy), rh = to_d(c.dhn), rc = to_d(c.dcn);
      auto loss = [&] {
        std::vector<double> y(s.rows() * s.H), hn(s.B * s.H), cn(s.B * s.H, 0.0);
        rnn_forward_ref(s, {wih.data(), whh.data(), bih.data(), bhh.data()}, x.data(), h0.data(), c0.data(), y.data(),
                        hn.data(), cn.data());
        return dot(y, ry) + dot(hn, rh) + (cell == RnnCell::lstm ? dot(cn, rc) : 0.0);
      };
      const RefOut r = reference(c);
      SCOPED_TRACE(c.name());
      EXPECT_LT(gradcheck(x, r.dx, loss, 1000), kFdTol) << "x";
      EXPECT_LT(gradcheck(h0, r.dh0, loss, 1000), kFdTol) << "h0";
      if (cell == RnnCell::lstm) {
        EXPECT_LT(gradcheck(c0, r.dc0, loss, 1000), kFdTol) << "c0";
      }
      EXPECT_LT(gradcheck(wih, r.dwih, loss, 1000), kFdTol) << "w_ih";
      EXPECT_LT(gradcheck(whh, r.dwhh, loss, 1000), kFdTol) << "w_hh";
      EXPECT_LT(gradcheck(bih, r.dbih, loss, 1000), kFdTol) << "b_ih";
      EXPECT_LT(gradcheck(bhh, r.dbhh, loss, 1000), kFdTol) << "b_hh";
    }
}

// The layouts hold the same sequences: batch_first is the sequence-first case transposed.
TEST(SeqRnn, LayoutsAgree) {
  Case a(RnnCell::lstm, 6, 3, 4, 8, false), b = a;
  b.s.batch_first = true;
  const int T = 6, B = 3, I = 4;
  for (int t = 0; t < T; ++t)
    for (int n = 0; n < B; ++n)
      for (int i = 0; i < I; ++i) b.x[(n * T + t) * I + i] = a.x[(t * B + n) * I + i];
  const RefOut ra = reference(a), rb = reference(b);
  EXPECT_EQ(ra.hn, rb.hn);
  EXPECT_EQ(ra.cn, rb.cn);
}

TEST(SeqRnn, FastMatchesReferenceAtEveryIsa) {
  for (const Case& c : cases()) each_isa([&] { compare(c, run_ours, default_tolerance(DType::fp32)); });
}

// RnnShape::bf16: every GEMM on bf16-rounded operands (8 mantissa bits, fp32 sums), the cell in fp32,
// from x and weights already bf16 (as autocast hands them over): near the fp64 reference, and not
// fp32's numbers (the bf16 GEMMs ran). h is rounded (2^-9) for every step's GEMM and W_hh amplifies
// it: the tanh RNN of T 9, H 48 (|W_hh| ~ 2.4, chaotic) ends 2.4e-2 off, every LSTM and shorter case
// under bf16's 1e-2: 3e-2. At avx512_bf16 bf16_gemm runs oneDNN's vdpbf16ps; below, widen + sgemm.
TEST(SeqRnn, Bf16GemmsWithinBf16AtEveryIsa) {
  using cpu::Isa;
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::avx512_bf16}) {
    if (int(isa) > int(cpu::isa_cap())) continue;
    cpu::IsaLimit lim(isa);
    SCOPED_TRACE(cpu::isa_name(isa));
    for (Case c : cases()) {
      // the operands autocast hands the layer: x and the weights already bf16 (the plan rounds them)
      for (auto* v : {&c.x, &c.wih, &c.whh}) cpu::round_through_bf16(v->data(), v->size());
      const std::size_t ys = std::size_t(c.s.rows()) * std::size_t(c.s.H);
      std::vector<float> y32(ys), y16(ys), saved;
      const RnnWeights w{c.wih.data(), c.whh.data(), c.bias ? c.bih.data() : nullptr, c.bias ? c.bhh.data() : nullptr};
      rnn_forward(c.s, w, c.x.data(), nullptr, nullptr, y32.data(), nullptr, nullptr, saved);
      c.s.bf16 = true;
      compare(c, run_ours, 3e-2);
      rnn_forward(c.s, w, c.x.data(), nullptr, nullptr, y16.data(), nullptr, nullptr, saved);
      EXPECT_GT(max_rel_err(y16.data(), y32.data(), ys), 0) << c.name();
    }
  }
}

// RnnGrads::accumulate adds into the gradients (a layer's Param::grad), and without dh0 / dc0
// wanted the last step's dh is not computed: the other outputs are the same.
TEST(SeqRnn, AccumulatesIntoGradientsWithoutDh0) {
  for (const Case& c : cases()) {
    if (c.s.bf16) continue;
    const RefOut r = reference(c);
    const RnnWeights w{c.wih.data(), c.whh.data(), c.bias ? c.bih.data() : nullptr, c.bias ? c.bhh.data() : nullptr};
    std::vector<float> y(r.y.size()), dx(r.dx.size()), saved;
    std::vector<float> dwih(r.dwih.size(), 0.5f), dwhh(r.dwhh.size(), 0.5f), db(r.dbih.size(), 0.5f), db2 = db;
    rnn_forward(c.s, w, c.x.data(), c.init ? c.h0.data() : nullptr, c.init ? c.c0.data() : nullptr, y.data(), nullptr,
                nullptr, saved);
    RnnGrads g{dwih.data(), dwhh.data(), db.data(), db2.data(), true};
    rnn_backward(c.s, w, c.x.data(), c.dy.data(), c.dhn.data(), c.dcn.data(), saved, dx.data(), nullptr, nullptr, g);
    const double tol = default_tolerance(DType::fp32);
    auto plus_half = [](std::vector<double> v) {
      for (double& e : v) e += 0.5;
      return v;
    };
    SCOPED_TRACE(c.name());
    EXPECT_LT(max_rel_err(dx.data(), r.dx.data(), dx.size()), tol);
    EXPECT_LT(max_rel_err(dwih.data(), plus_half(r.dwih).data(), dwih.size()), tol);
    EXPECT_LT(max_rel_err(dwhh.data(), plus_half(r.dwhh).data(), dwhh.size()), tol);
    EXPECT_LT(max_rel_err(db.data(), plus_half(r.dbih).data(), db.size()), tol);
    EXPECT_LT(max_rel_err(db2.data(), plus_half(r.dbhh).data(), db2.size()), tol);
  }
}

TEST(SeqRnn, ThreadsGiveTheSameBits) {
  const Case c(RnnCell::lstm, 6, 64, 24, 40, true);
  auto run = [&] {
    std::vector<std::vector<float>> o;
    const RefOut r = reference(c);
    for (auto* v : {&r.y, &r.hn, &r.cn, &r.dx, &r.dh0, &r.dc0, &r.dwih, &r.dwhh, &r.dbih, &r.dbhh})
      o.emplace_back(v->size(), 0.f);
    run_ours(c, o);
    return o;
  };
  const auto many = run();
  cpu::KernelThreadsLimit one(1);
  EXPECT_EQ(many, run());
}

TEST(SeqRnn, BadShapesThrow) {
  RnnShape s;
  s.T = 0, s.B = 1, s.I = 1, s.H = 1;
  std::vector<float> saved, w(4, 0.f);
  EXPECT_THROW(rnn_forward(s, {w.data(), w.data()}, w.data(), nullptr, nullptr, w.data(), nullptr, nullptr, saved),
               std::invalid_argument);
}

TEST(SeqRnnOnednn, MatchesReference) {
  if (!cpu::onednn::available()) GTEST_SKIP() << cpu::onednn::unavailable_reason();
  for (const Case& c : cases()) compare(c, run_onednn, default_tolerance(DType::fp32));
}
