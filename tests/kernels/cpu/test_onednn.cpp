// The oneDNN backend (kernels/cpu/onednn/): matmul fp32/bf16 with transposes, leading dimensions
// and beta, and conv forward / backward-data / backward-filter in fp32, bf16 and fp32-in/bf16-compute (padding, stride,
// non-square, the lecture's layers in miniature) against the fp64 references. Registered once per
// ISA level too (tests/smoke_isa.cmake sets DLB_CPU_ISA), so oneDNN's avx2, avx512_core and
// avx512_core_bf16 kernels all run here; a level the CPU lacks is clamped and skipped with the reason.
// Without oneDNN in the build every test skips with the reason.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/common/errors.h"
#include "kernels/common/verify.h"
#include "kernels/cpu/bf16_cast.h"
#include "kernels/cpu/bf16_gemm.h"
#include "kernels/cpu/conv2d/conv2d.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/onednn/onednn.h"

using namespace dlb;
namespace dn = dlb::cpu::onednn;

namespace {

class OneDnn : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!dn::available()) GTEST_SKIP() << dn::unavailable_reason();
    const char* e = std::getenv("DLB_CPU_ISA");
    cpu::Isa want;
    if (e && cpu::parse_isa(e, &want) && static_cast<int>(want) > static_cast<int>(cpu::isa_detected()))
      GTEST_SKIP() << "DLB_CPU_ISA=" << e << ": this CPU has only " << cpu::isa_name(cpu::isa_detected());
  }
};

std::vector<std::uint16_t> to_bf16(std::vector<float>& v) {  // rounds v in place to what bf16 holds
  std::vector<std::uint16_t> h(v.size());
  cpu::cast_fp32_to_bf16(v.data(), h.data(), v.size());
  cpu::cast_bf16_to_fp32(h.data(), v.data(), v.size());
  return h;
}

}  // namespace

TEST_F(OneDnn, RunsAtTheCappedIsa) {
  const std::string isa = dn::isa();
  switch (cpu::isa_cap()) {
    case cpu::Isa::scalar: EXPECT_EQ(isa, "sse41"); break;
    case cpu::Isa::avx2: EXPECT_TRUE(isa == "avx2" || isa == "avx2_vnni") << isa; break;
    case cpu::Isa::avx512: EXPECT_TRUE(isa == "avx512_core" || isa == "avx512_core_vnni") << isa; break;
    case cpu::Isa::avx512_bf16: EXPECT_EQ(isa, "avx512_core_bf16"); break;
  }
  EXPECT_EQ(dn::bf16_native(), cpu::isa_cap() == cpu::Isa::avx512_bf16);
  EXPECT_FALSE(dn::version().empty());
}

TEST_F(OneDnn, GemmMatchesReference) {
  const long m = 37, n = 29, k = 71;
  for (dn::Dt dt : {dn::Dt::f32, dn::Dt::bf16})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (float beta : {0.0f, 0.5f}) {
          const long lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ldc = n + 2;  // padded rows
          std::vector<float> a((ta ? k : m) * lda), b((tb ? n : k) * ldb);
          fill_uniform(a.data(), a.size(), 5), fill_uniform(b.data(), b.size(), 6);
          std::vector<std::uint16_t> a16, b16;
          if (dt == dn::Dt::bf16) a16 = to_bf16(a), b16 = to_bf16(b);
          std::vector<float> c(m * ldc, 1.0f);
          std::vector<double> ref(m * n);
          for (long i = 0; i < m; ++i)
            for (long j = 0; j < n; ++j) {
              double s = 0;
              for (long p = 0; p < k; ++p)
                s += double(ta ? a[p * lda + i] : a[i * lda + p]) * double(tb ? b[j * ldb + p] : b[p * ldb + j]);
              ref[i * n + j] = s + beta * 1.0;
            }
          dn::Gemm g;
          g.dt = dt, g.trans_a = ta, g.trans_b = tb, g.m = m, g.n = n, g.k = k, g.lda = lda, g.ldb = ldb, g.ldc = ldc;
          g.a = dt == dn::Dt::bf16 ? static_cast<const void*>(a16.data()) : a.data();
          g.b = dt == dn::Dt::bf16 ? static_cast<const void*>(b16.data()) : b.data();
          g.c = c.data(), g.beta = beta;
          try {
            dn::gemm(g);
          } catch (const Unsupported& e) {  // bf16 below avx512_core: oneDNN 2.x has no kernel
            ASSERT_EQ(dt, dn::Dt::bf16) << e.what();
            ASSERT_LT(static_cast<int>(cpu::isa_cap()), static_cast<int>(cpu::Isa::avx512)) << e.what();
            continue;
          }
          std::vector<float> got(m * n);
          for (long i = 0; i < m; ++i)
            for (long j = 0; j < n; ++j) got[i * n + j] = c[i * ldc + j];
          EXPECT_LT(max_rel_err(got.data(), ref.data(), got.size()), 1e-5)
              << "bf16=" << (dt == dn::Dt::bf16) << " ta=" << ta << " tb=" << tb << " beta=" << beta << " "
              << dn::last_impl();
        }
}

TEST_F(OneDnn, ConvMatchesReferenceEveryDirection) {
  for (const auto& sh : {Conv2dShape::make(2, 3, 16, 16, 32, 5, 5),      // lecture conv1 in miniature
                         Conv2dShape::make(2, 32, 7, 7, 16, 5, 5),       // lecture conv2 in miniature
                         Conv2dShape::make(3, 4, 11, 10, 6, 3, 3, 1, 2),  // pad + stride 2, odd sizes
                         Conv2dShape::make(1, 5, 9, 7, 4, 2, 3, 0, 1)}) { // non-square filter
    // f32_as_bf16: fp32 arrays in, converted by oneDNN's reorders; y and dx come back bf16-rounded.
    for (dn::Dt dt : {dn::Dt::f32, dn::Dt::bf16, dn::Dt::f32_as_bf16}) {
      std::vector<float> x(sh.x_size()), w(sh.w_size()), b(sh.k), dy(sh.y_size());
      fill_uniform(x.data(), x.size(), 1), fill_uniform(w.data(), w.size(), 2);
      fill_uniform(b.data(), b.size(), 3), fill_uniform(dy.data(), dy.size(), 4);
      std::vector<std::uint16_t> x16, w16, dy16;
      const bool bf = dt != dn::Dt::f32, bits = dt == dn::Dt::bf16;
      // The reference sees the bf16 values either way (f32_as_bf16 rounds them the same way inside).
      if (bf) x16 = to_bf16(x), w16 = to_bf16(w), dy16 = to_bf16(dy);
      const void* px = bits ? static_cast<const void*>(x16.data()) : x.data();
      const void* pw = bits ? static_cast<const void*>(w16.data()) : w.data();
      const void* pdy = bits ? static_cast<const void*>(dy16.data()) : dy.data();
      std::vector<float> y(sh.y_size()), dx(sh.x_size()), dw(sh.w_size()), db(sh.k);
      try {
        dn::conv2d_forward(sh, dt, px, pw, b.data(), y.data());
        dn::conv2d_backward_data(sh, dt, pdy, pw, dx.data());
        dn::conv2d_backward_filter(sh, dt, px, pdy, dw.data(), db.data());
      } catch (const Unsupported& e) {
        ASSERT_TRUE(bf && static_cast<int>(cpu::isa_cap()) < static_cast<int>(cpu::Isa::avx512)) << e.what();
        continue;
      }
      std::vector<double> ry(sh.y_size()), rdx(sh.x_size()), rdw(sh.w_size()), rdb(sh.k);
      cpu::conv2d_forward_direct(sh, x.data(), w.data(), b.data(), ry.data());
      cpu::conv2d_backward_data_direct(sh, dy.data(), w.data(), rdx.data());
      cpu::conv2d_backward_filter_direct(sh, x.data(), dy.data(), rdw.data(), rdb.data());
      // bf16 inputs are exact; the accumulation is fp32 either way (oneDNN may round bf16 partial
      // sums of its blocked reductions, hence the bf16 tolerance there).
      const double tol = default_tolerance(bf ? DType::bf16 : DType::fp32);
      const std::string what = sh.str() + (dt == dn::Dt::f32 ? " fp32" : bits ? " bf16" : " f32_as_bf16");
      if (dt == dn::Dt::f32_as_bf16) {
        for (const auto* v : {&y, &dx})
          for (float f : *v) ASSERT_EQ(f, cpu::bf16_to_fp32_ref(cpu::fp32_to_bf16_ref(f))) << what << ": not bf16";
      }
      EXPECT_LT(max_rel_err(y.data(), ry.data(), y.size()), tol) << what;
      EXPECT_LT(max_rel_err(dx.data(), rdx.data(), dx.size()), tol) << what;
      EXPECT_LT(max_rel_err(dw.data(), rdw.data(), dw.size()), tol) << what;
      EXPECT_LT(max_rel_err(db.data(), rdb.data(), db.size()), tol) << what;
    }
  }
}

// The AMP step's nChw16c hand-offs: the bf16 forward left in oneDNN's layout and the backward taking
// dy in it give exactly what the Dt::f32_as_bf16 calls give (the same primitives, without the
// reorders), on the lecture layers in miniature, with a batch the threads cut into parts of two sizes.
TEST_F(OneDnn, Nchw16cHandOffsMatchF32AsBf16) {
  if (!dn::bf16_native()) GTEST_SKIP() << "no native bf16 at ISA " << dn::isa();
  for (const auto& sh : {Conv2dShape::make(3, 3, 16, 16, 32, 5, 5), Conv2dShape::make(3, 32, 7, 7, 16, 5, 5)}) {
    SCOPED_TRACE(sh.str());
    std::vector<float> x(sh.x_size()), w(sh.w_size()), b(sh.k), dy(sh.y_size());
    fill_uniform(x.data(), x.size(), 11), fill_uniform(w.data(), w.size(), 12);
    fill_uniform(b.data(), b.size(), 13), fill_uniform(dy.data(), dy.size(), 14);
    to_bf16(x), to_bf16(w), to_bf16(dy);
    std::vector<float> y(sh.y_size());
    dn::conv2d_forward(sh, dn::Dt::f32_as_bf16, x.data(), w.data(), b.data(), y.data());
    std::vector<std::uint16_t> y16(sh.y_size());
    if (!dn::conv2d_forward_bf16_nchw16c(sh, x.data(), w.data(), b.data(), y16.data()))
      GTEST_SKIP() << "oneDNN writes another layout here";
    const int P = sh.p(), Q = sh.q(), kb = sh.k / 16;
    auto at = [&](int in, int k, int s) { return ((std::size_t(in) * kb + k / 16) * P * Q + s) * 16 + k % 16; };
    std::vector<std::uint16_t> dy16(sh.y_size());
    for (int in = 0; in < sh.n; ++in)
      for (int k = 0; k < sh.k; ++k)
        for (int s = 0; s < P * Q; ++s) {
          const std::size_t o = (std::size_t(in) * sh.k + k) * P * Q + s;
          ASSERT_EQ(cpu::bf16_to_fp32_ref(y16[at(in, k, s)]), y[o]);
          dy16[at(in, k, s)] = cpu::fp32_to_bf16_ref(dy[o]);
        }
    std::vector<float> dw(sh.w_size()), db(sh.k), dx(sh.x_size()), dw2(sh.w_size()), db2(sh.k), dx2(sh.x_size());
    dn::conv2d_backward_filter(sh, dn::Dt::f32_as_bf16, x.data(), dy.data(), dw.data(), db.data());
    dn::conv2d_backward_data(sh, dn::Dt::f32_as_bf16, dy.data(), w.data(), dx.data());
    ASSERT_TRUE(dn::conv2d_backward_reads_nchw16c_dy(sh, true, true));
    ASSERT_TRUE(dn::conv2d_backward_bf16_nchw16c_dy(sh, x.data(), w.data(), dy16.data(), dw2.data(), db2.data(), dx2.data()));
    EXPECT_EQ(dw2, dw);
    EXPECT_EQ(db2, db);
    EXPECT_EQ(dx2, dx);
  }
}
