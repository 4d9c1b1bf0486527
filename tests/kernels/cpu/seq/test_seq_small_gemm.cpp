// small_gemm (kernels/cpu/seq/small_gemm.h), the recurrent layers' register-tiled product: against
// its fp64 reference at every ISA level the CPU runs, over row counts around the tile height (1 to 2
// tiles + a remainder, and beyond one row block), column counts with whole panels and masked tails,
// A as stored and transposed, padded leading dimensions (whose padding must stay untouched), both
// overwrite and accumulate; and the threaded column split against one thread, bit for bit.
#include <gtest/gtest.h>

#include <array>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/common/verify.h"
#include "kernels/cpu/seq/small_gemm.h"
#include "kernels/cpu/threads.h"
#include "tests/seq_test_util.h"

using namespace dlb;
using namespace dlb::cpu::seq;
using namespace seqtest;

namespace {

struct Gemm {
  bool ta;  // A stored [k x m] (transposed)
  long m, n, k, lda, ldb, ldc;
  std::vector<float> a, b, c0;
  Gemm(bool ta_, long m_, long n_, long k_)
      : ta(ta_), m(m_), n(n_), k(k_), lda((ta_ ? m_ : k_) + 3), ldb(n_ + 5), ldc(n_ + 2) {
    a = rand_f(std::size_t((ta ? k : m) * lda), 1), b = rand_f(std::size_t(k * ldb), 2);
    c0 = rand_f(std::size_t(m * ldc), 3);
  }
  std::vector<float> run(bool acc) const {
    std::vector<float> c = c0;
    small_gemm(ta, m, n, k, a.data(), lda, b.data(), ldb, acc, c.data(), ldc);
    return c;
  }
  std::string name() const {
    return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + (ta ? " A^T" : "");
  }
};

}  // namespace

TEST(SeqSmallGemm, MatchesReferenceAtEveryIsa) {
  for (bool ta : {false, true})
    for (long m : {1L, 3L, 4L, 8L, 9L, 19L, 133L})
      for (long n : {1L, 5L, 16L, 40L, 80L, 131L})
        for (long k : {1L, 7L, 64L}) {
          if (m > 19 && n < 80) continue;  // beyond one row block (128): a few shapes suffice
          const Gemm g(ta, m, n, k);
          const auto a = to_d(g.a), b = to_d(g.b);
          for (bool acc : {false, true}) {
            std::vector<double> want = to_d(g.c0);
            small_gemm_ref(ta, g.m, g.n, g.k, a.data(), g.lda, b.data(), g.ldb, acc, want.data(), g.ldc);
            each_isa([&] {
              const std::vector<float> got = g.run(acc);
              SCOPED_TRACE(g.name() + (acc ? " accumulate" : ""));
              std::vector<float> got_mn;  // the m x n result, against the largest |element| of the reference's
              std::vector<double> want_mn;
              for (long i = 0; i < g.m; ++i) {
                got_mn.insert(got_mn.end(), &got[i * g.ldc], &got[i * g.ldc] + g.n);
                want_mn.insert(want_mn.end(), &want[i * g.ldc], &want[i * g.ldc] + g.n);
                for (long j = g.n; j < g.ldc; ++j)  // the padding untouched
                  ASSERT_EQ(got[i * g.ldc + j], g.c0[i * g.ldc + j]) << "row " << i << " col " << j;
              }
              EXPECT_LT(max_rel_err(got_mn.data(), want_mn.data(), got_mn.size()), default_tolerance(DType::fp32));
            });
          }
        }
}

TEST(SeqSmallGemm, ThreadsGiveTheSameBits) {
  const Gemm g(false, 8, 512, 128);  // the LSTM's per-step product at batch 8: 16 panels to split
  const auto many = g.run(true);
  cpu::KernelThreadsLimit one(1);
  EXPECT_EQ(many, g.run(true));
}

// small_gemm_serial (the recurrence's batch-row tasks, rnn.cpp) is the same product, bit for bit, also
// on a range of rows (any row, any block of 128), transposed A or not.
TEST(SeqSmallGemm, SerialGivesTheSameBits) {
  for (const bool ta : {false, true})
    for (const auto [m, n, k] : {std::array<long, 3>{64, 512, 128}, {32, 128, 512}, {300, 96, 40}, {5, 20, 7}}) {
      const Gemm g(ta, m, n, k);
      for (const bool acc : {false, true}) {
        std::vector<float> c = g.c0;
        small_gemm_serial(ta, g.m, g.n, g.k, g.a.data(), g.lda, g.b.data(), g.ldb, acc, c.data(), g.ldc);
        EXPECT_EQ(c, g.run(acc)) << "ta " << ta << " m " << m << " n " << n << " k " << k << " acc " << acc;
      }
    }
}

TEST(SeqSmallGemm, EmptyIsANoOp) {
  const Gemm g(false, 4, 16, 8);
  std::vector<float> c = g.c0;
  small_gemm(false, 0, g.n, g.k, g.a.data(), g.lda, g.b.data(), g.ldb, false, c.data(), g.ldc);
  small_gemm(false, g.m, 0, g.k, g.a.data(), g.lda, g.b.data(), g.ldb, false, c.data(), g.ldc);
  EXPECT_EQ(c, g.c0);
  // k = 0: C = 0 (or unchanged with accumulate), as sgemm
  small_gemm(false, g.m, g.n, 0, g.a.data(), g.lda, g.b.data(), g.ldb, true, c.data(), g.ldc);
  EXPECT_EQ(c, g.c0);
  small_gemm(false, g.m, g.n, 0, g.a.data(), g.lda, g.b.data(), g.ldb, false, c.data(), g.ldc);
  EXPECT_EQ(c[0], 0.f);
}
