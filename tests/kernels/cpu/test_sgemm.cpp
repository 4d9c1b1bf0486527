// The layers' fp32 GEMM (kernels/cpu/sgemm.h): every library this build has (OpenBLAS always, oneDNN
// when built in) against an fp64 product, over transposes, beta 0 (C holding NaN) and 1, a row bias, padded
// leading dimensions, one and every kernel thread (oneDNN's split by rows and by columns), and from
// inside a parallel region (a model replica's call); the dense-layer helpers against the general
// call; the process's library against the auto rule. Registered per ISA level too
// (tests/smoke_isa.cmake), so oneDNN's avx2 and avx512 kernels both run where the CPU has them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "kernels/common/verify.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/onednn/onednn.h"
#include "kernels/cpu/sgemm.h"
#include "kernels/cpu/threads.h"

using namespace dlb::cpu;

namespace {

struct Case {
  long m, n, k;
  bool ta, tb;
  float beta;
  long pad;  // extra columns in every leading dimension
  bool bias = false;  // a row bias (Sgemm::bias, beta 0)
};

std::vector<float> filled(std::size_t n, std::uint64_t seed) {
  std::vector<float> v(n);
  dlb::fill_uniform(v.data(), n, seed);
  return v;
}

// Runs `c` with `lib` and checks every entry against fp64: |got - want| <= 4 k eps sum|a b| + tiny.
void check(SgemmLib lib, const Case& c) {
  SCOPED_TRACE(std::string(sgemm_lib_name(lib)) + " m" + std::to_string(c.m) + " n" + std::to_string(c.n) + " k" +
               std::to_string(c.k) + " ta" + std::to_string(c.ta) + " tb" + std::to_string(c.tb) + " beta" +
               std::to_string(c.beta) + " pad" + std::to_string(c.pad) + " bias" + std::to_string(c.bias));
  const long lda = (c.ta ? c.m : c.k) + c.pad, ldb = (c.tb ? c.k : c.n) + c.pad, ldc = c.n + c.pad;
  const auto a = filled(std::size_t((c.ta ? c.k : c.m) * lda), 1), b = filled(std::size_t((c.tb ? c.n : c.k) * ldb), 2);
  std::vector<float> cc = filled(std::size_t(c.m * ldc), 3);
  const std::vector<float> c0 = cc, bias = filled(std::size_t(c.n), 7);
  if (c.beta == 0.f)  // overwritten: whatever C held must not leak in
    for (long i = 0; i < c.m; ++i)
      for (long j = 0; j < c.n; ++j) cc[std::size_t(i * ldc + j)] = std::numeric_limits<float>::quiet_NaN();
  Sgemm g;
  g.trans_a = c.ta, g.trans_b = c.tb, g.m = c.m, g.n = c.n, g.k = c.k;
  g.a = a.data(), g.lda = lda, g.b = b.data(), g.ldb = ldb, g.beta = c.beta, g.c = cc.data(), g.ldc = ldc;
  if (c.bias) g.bias = bias.data();
  sgemm_with(lib, g);
  for (long i = 0; i < c.m; ++i)
    for (long j = 0; j < c.n; ++j) {
      double want = c.beta * double(c0[std::size_t(i * ldc + j)]) + (c.bias ? bias[std::size_t(j)] : 0.0),
             mag = std::fabs(want);
      for (long p = 0; p < c.k; ++p) {
        const double x = a[std::size_t(c.ta ? p * lda + i : i * lda + p)], y = b[std::size_t(c.tb ? j * ldb + p : p * ldb + j)];
        want += x * y, mag += std::fabs(x * y);
      }
      const double got = cc[std::size_t(i * ldc + j)];
      ASSERT_LE(std::fabs(got - want), 4.0 * double(c.k + 1) * 1.2e-7 * mag + 1e-30) << "C[" << i << "," << j << "]";
    }
  for (long i = 0; i < c.m; ++i)  // the padding columns are not written
    for (long j = c.n; j < ldc; ++j) ASSERT_EQ(cc[std::size_t(i * ldc + j)], c0[std::size_t(i * ldc + j)]);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  // Tall (split by rows), wide (split by columns), tiny, k = 1 and odd tails.
  const long shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {17, 33, 9}, {96, 40, 48}, {24, 200, 33}, {2, 130, 65}, {130, 2, 1}};
  for (const auto& s : shapes)
    for (int t = 0; t < 4; ++t)
      for (int v = 0; v < 3; ++v)  // beta 0, beta 1, beta 0 with a bias
        out.push_back({s[0], s[1], s[2], bool(t & 1), bool(t & 2), v == 1 ? 1.f : 0.f, (t == 3) ? 3L : 0L, v == 2});
  return out;
}

std::vector<SgemmLib> libs() {
  std::vector<SgemmLib> l{SgemmLib::openblas};
  if (sgemm_lib_available(SgemmLib::onednn)) l.push_back(SgemmLib::onednn);
  return l;
}

TEST(Sgemm, EveryLibraryMatchesFp64OnEveryThreadCount) {
  for (SgemmLib lib : libs())
    for (int threads : {1, kernel_threads()}) {
      KernelThreadsLimit limit(threads);
      SCOPED_TRACE("kernel threads " + std::to_string(threads));
      for (const Case& c : cases()) check(lib, c);
    }
}

// A replica's layer calls the GEMM from inside a task: each task's product is whole and right.
TEST(Sgemm, InsideAParallelRegionEachTaskComputesItsOwn) {
  for (SgemmLib lib : libs())
    parallel_tasks(2, [&](int t) {
      check(lib, {40 + t, 70, 24, t == 1, false, 1.f, 0});
      check(lib, {70, 40 + t, 24, false, t == 1, 0.f, 0});
    });
}

TEST(Sgemm, DenseLayerHelpersAreTheGeneralCall) {
  const long m = 6, n = 9, k = 5;
  const auto a = filled(std::size_t(m * k), 4), b = filled(std::size_t(n * k), 5), at = filled(std::size_t(k * m), 6);
  std::vector<float> c1(std::size_t(m * n)), c2(std::size_t(m * n));
  Sgemm g;
  g.m = m, g.n = n, g.k = k, g.a = a.data(), g.b = b.data(), g.c = c1.data();
  g.trans_b = true;
  sgemm(g);
  sgemm_nt(m, n, k, a.data(), b.data(), c2.data());
  EXPECT_EQ(c1, c2);
  const auto bias = filled(std::size_t(n), 8);
  g.bias = bias.data();
  sgemm(g);
  sgemm_nt(m, n, k, a.data(), b.data(), c2.data(), bias.data());
  EXPECT_EQ(c1, c2);
  g.bias = nullptr;
  g.trans_b = false;  // b as k x n
  sgemm(g);
  sgemm_nn(m, n, k, a.data(), b.data(), c2.data());
  EXPECT_EQ(c1, c2);
  g.trans_a = true, g.a = at.data(), g.beta = 1.f;  // C += A^T B, from the C just made
  std::vector<float> c3 = c1;
  sgemm(g);
  sgemm_tn_add(m, n, k, at.data(), b.data(), c3.data());
  EXPECT_EQ(c1, c3);
}

// The auto rule: oneDNN where it is built in and may use AVX-512, OpenBLAS otherwise; DLB_SGEMM wins.
TEST(Sgemm, TheProcessLibraryFollowsTheRule) {
  const char* e = std::getenv("DLB_SGEMM");
  const std::string v = e ? e : "";
  SgemmLib want = SgemmLib::openblas;
  if (v == "onednn") want = SgemmLib::onednn;
  else if (v != "openblas" && onednn::available() && int(isa_cap()) >= int(Isa::avx512)) want = SgemmLib::onednn;
  EXPECT_EQ(sgemm_lib(), want) << sgemm_lib_reason();
  EXPECT_FALSE(sgemm_lib_reason().empty());
  // Per product: a large one takes the process's library; a small one OpenBLAS under auto, the
  // forced library under DLB_SGEMM.
  EXPECT_EQ(sgemm_lib_for(256, 768, 768), want);
  EXPECT_EQ(sgemm_lib_for(1, 128, 128), v == "onednn" ? SgemmLib::onednn : SgemmLib::openblas);
  EXPECT_EQ(sgemm_lib_for(8, 512, 128), want);  // exactly kSgemmSmallWork: not small
}

}  // namespace
