// Attention (kernels/cpu/seq/attention.h): the fp64 reference gradchecked by central differences
// (full, causal, Tq != Tk, dropout), then every algorithm of attention_algos() (unfused, flash) at
// every ISA level the CPU runs against it: head dims 64 and 128 and small odd ones, both layouts
// (heads-major and a packed [B, T, 3C] QKV read in place), causal and full, forward and backward.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/common/verify.h"
#include "kernels/cpu/seq/attention.h"
#include "kernels/cpu/threads.h"
#include "tests/seq_test_util.h"

using namespace dlb;
using namespace dlb::cpu::seq;
using namespace seqtest;

namespace {

// Q, K, V (and O, dO, dQ, dK, dV) of one problem in a chosen layout. packed: Q, K, V interleaved as a
// [B, T, 3 H D] projection output (Tq == Tk), O and the gradients [B, T, H D]; else [B, H, T, D].
struct Problem {
  Attn a;
  bool packed = false;
  std::vector<float> qkv, k_sep, v_sep, dout;  // qkv holds Q (and K, V when packed)
  Problem(Attn a_, bool packed_) : a(a_), packed(packed_) {
    const std::size_t nq = std::size_t(a.B) * a.H * a.Tq * a.D, nk = std::size_t(a.B) * a.H * a.Tk * a.D;
    qkv = rand_f(packed ? 3 * nq : nq, 31);
    if (!packed) k_sep = rand_f(nk, 32), v_sep = rand_f(nk, 33);
    dout = rand_f(nq, 34);
  }
  long row() const { return 3L * a.H * a.D; }
  template <class T>
  HeadsView<T> view(T* p, int which, int T_) const {  // which: 0 Q, 1 K, 2 V (packed offsets)
    return packed ? bthd(p + which * a.H * a.D, a.H, T_, a.D, row()) : bhtd(p, a.H, T_, a.D);
  }
  template <class T>
  HeadsView<T> out_view(T* p, int T_) const {
    return packed ? bthd(p, a.H, T_, a.D) : bhtd(p, a.H, T_, a.D);
  }
  std::string name() const {
    return "B" + std::to_string(a.B) + " H" + std::to_string(a.H) + " Tq" + std::to_string(a.Tq) + " Tk" +
           std::to_string(a.Tk) + " D" + std::to_string(a.D) + (a.causal ? " causal" : "") +
           (packed ? " packed" : "") + (a.dropout > 0 ? " dropout" : "");
  }
};

struct Ref {
  std::vector<double> o, dq, dk, dv;
};
Ref reference(const Problem& pr) {
  const Attn& a = pr.a;
  const std::size_t nq = std::size_t(a.B) * a.H * a.Tq * a.D, nk = std::size_t(a.B) * a.H * a.Tk * a.D;
  const auto qkv = to_d(pr.qkv), ks = to_d(pr.k_sep), vs = to_d(pr.v_sep), g = to_d(pr.dout);
  const double* kp = pr.packed ? qkv.data() : ks.data();
  const double* vp = pr.packed ? qkv.data() : vs.data();
  Ref r{std::vector<double>(nq), std::vector<double>(nq), std::vector<double>(nk), std::vector<double>(nk)};
  const auto q = pr.view<const double>(qkv.data(), 0, a.Tq), k = pr.view<const double>(kp, 1, a.Tk),
             v = pr.view<const double>(vp, 2, a.Tk);
  attention_forward_ref(a, q, k, v, pr.out_view<double>(r.o.data(), a.Tq));
  attention_backward_ref(a, q, k, v, pr.out_view<const double>(g.data(), a.Tq), pr.out_view<double>(r.dq.data(), a.Tq),
                         pr.out_view<double>(r.dk.data(), a.Tk), pr.out_view<double>(r.dv.data(), a.Tk));
  return r;
}

void check_algo(const AttnAlgo& algo, const Problem& pr, const Ref& r) {
  const Attn& a = pr.a;
  const float* kp = pr.packed ? pr.qkv.data() : pr.k_sep.data();
  const float* vp = pr.packed ? pr.qkv.data() : pr.v_sep.data();
  const auto q = pr.view<const float>(pr.qkv.data(), 0, a.Tq), k = pr.view<const float>(kp, 1, a.Tk),
             v = pr.view<const float>(vp, 2, a.Tk);
  std::vector<float> o(r.o.size(), NAN), dq(r.dq.size(), NAN), dk(r.dk.size(), NAN), dv(r.dv.size(), NAN);
  AttnSaved saved;
  algo.forward(a, q, k, v, pr.out_view<float>(o.data(), a.Tq), saved);
  algo.backward(a, q, k, v, pr.out_view<const float>(o.data(), a.Tq), pr.out_view<const float>(pr.dout.data(), a.Tq),
                saved, pr.out_view<float>(dq.data(), a.Tq), pr.out_view<float>(dk.data(), a.Tk),
                pr.out_view<float>(dv.data(), a.Tk));
  const double tol = default_tolerance(DType::fp32);
  SCOPED_TRACE(std::string(algo.name) + " " + pr.name());
  EXPECT_LT(max_rel_err(o.data(), r.o.data(), o.size()), tol) << "O";
  EXPECT_LT(max_rel_err(dq.data(), r.dq.data(), dq.size()), tol) << "dQ";
  EXPECT_LT(max_rel_err(dk.data(), r.dk.data(), dk.size()), tol) << "dK";
  EXPECT_LT(max_rel_err(dv.data(), r.dv.data(), dv.size()), tol) << "dV";
}

Attn attn(int B, int H, int Tq, int Tk, int D, bool causal, float dropout = 0) {
  Attn a;
  a.B = B, a.H = H, a.Tq = Tq, a.Tk = Tk, a.D = D, a.causal = causal, a.dropout = dropout;
  a.seed = 99, a.offset = 5;
  return a;
}

}  // namespace

TEST(SeqAttention, ReferenceGradcheck) {
  for (const Attn& a : {attn(1, 2, 5, 5, 3, false), attn(1, 2, 5, 5, 3, true), attn(2, 1, 4, 6, 3, true),
                        attn(1, 2, 5, 7, 3, false, 0.3f)}) {
    Problem pr(a, false);
    const Ref r = reference(pr);
    auto q = to_d(pr.qkv), k = to_d(pr.k_sep), v = to_d(pr.v_sep);
    const auto g = to_d(pr.dout);
    auto loss = [&] {
      std::vector<double> o(g.size());
      attention_forward_ref(a, bhtd<const double>(q.data(), a.H, a.Tq, a.D),
                            bhtd<const double>(k.data(), a.H, a.Tk, a.D), bhtd<const double>(v.data(), a.H, a.Tk, a.D),
                            bhtd<double>(o.data(), a.H, a.Tq, a.D));
      return dot(o, g);
    };
    SCOPED_TRACE(pr.name());
    EXPECT_LT(gradcheck(q, r.dq, loss, 1000), kFdTol) << "q";
    EXPECT_LT(gradcheck(k, r.dk, loss, 1000), kFdTol) << "k";
    EXPECT_LT(gradcheck(v, r.dv, loss, 1000), kFdTol) << "v";
  }
}

TEST(SeqAttention, EveryAlgorithmMatchesReferenceAtEveryIsa) {
  std::vector<Problem> problems;
  for (bool causal : {false, true}) {
    problems.emplace_back(attn(2, 2, 70, 70, 64, causal), false);   // tiles with tails (32-row, 64-key)
    problems.emplace_back(attn(1, 2, 40, 40, 128, causal), true);   // packed QKV, D 128
    problems.emplace_back(attn(2, 3, 19, 45, 12, causal), false);   // Tq != Tk, small odd D
    problems.emplace_back(attn(1, 1, 130, 100, 8, causal), false);  // Tq > Tk: rows past Tk see every key
    problems.emplace_back(attn(2, 1, 33, 33, 20, causal), true);
  }
  problems.emplace_back(attn(2, 2, 30, 30, 16, true, 0.2f), false);
  for (const Problem& pr : problems) {
    const Ref r = reference(pr);
    for (const AttnAlgo& algo : attention_algos()) {
      if (pr.a.dropout > 0 && !algo.dropout) continue;
      each_isa([&] { check_algo(algo, pr, r); });
    }
  }
}

TEST(SeqAttention, ThreadsGiveTheSameBits) {
  const Problem pr(attn(2, 4, 96, 96, 64, true), true);
  for (const AttnAlgo& algo : attention_algos()) {
    auto run = [&] {
      const auto q = pr.view<const float>(pr.qkv.data(), 0, 96), k = pr.view<const float>(pr.qkv.data(), 1, 96),
                 v = pr.view<const float>(pr.qkv.data(), 2, 96);
      std::vector<float> out(4 * pr.dout.size());
      float* o = out.data();
      float* dq = o + pr.dout.size();
      AttnSaved s;
      algo.forward(pr.a, q, k, v, pr.out_view<float>(o, 96), s);
      algo.backward(pr.a, q, k, v, pr.out_view<const float>(o, 96), pr.out_view<const float>(pr.dout.data(), 96), s,
                    pr.out_view<float>(dq, 96), pr.out_view<float>(dq + pr.dout.size(), 96),
                    pr.out_view<float>(dq + 2 * pr.dout.size(), 96));
      return out;
    };
    const auto many = run();
    cpu::KernelThreadsLimit one(1);
    EXPECT_EQ(many, run()) << algo.name;
  }
}

TEST(SeqAttention, TableAndArguments) {
  EXPECT_STREQ(attention_algo("flash").name, "flash");
  EXPECT_THROW(attention_algo("sdpa"), std::invalid_argument);
  Attn a = attn(1, 1, 4, 4, 8, false, 0.1f);
  std::vector<float> x(32, 0.f);
  AttnSaved s;
  EXPECT_THROW(attention_forward_flash(a, bhtd<const float>(x.data(), 1, 4, 8), bhtd<const float>(x.data(), 1, 4, 8),
                                       bhtd<const float>(x.data(), 1, 4, 8), bhtd(x.data(), 1, 4, 8), s),
               std::invalid_argument);
  a.dropout = 1.f;
  EXPECT_THROW(a.check(), std::invalid_argument);
  // FLOPs: 4 B H D per visible pair; causal 4x4 sees 10 of 16 pairs, 6x4 sees 10 + 2 * 4.
  EXPECT_EQ(attn(1, 1, 4, 4, 8, false).flops_forward(), 4.0 * 8 * 16);
  EXPECT_EQ(attn(1, 1, 4, 4, 8, true).flops_forward(), 4.0 * 8 * 10);
  EXPECT_EQ(attn(1, 1, 6, 4, 8, true).flops_forward(), 4.0 * 8 * 18);
}
