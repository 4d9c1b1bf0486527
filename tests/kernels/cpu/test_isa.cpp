// The ISA cap (kernels/cpu/isa.h): names parse both ways, IsaLimit lowers the active level and never
// raises it, and every SIMD path our kernels have runs and matches its reference at each level this
// CPU can run (conv2d's direct AVX2 kernels vs im2col, its sparse-dy backward, the bf16/fp16 casts, the bf16 GEMM launcher),
// so a machine with AVX-512 also tests the AVX2 and scalar paths. Levels the CPU lacks are skipped
// with the reason. The env side (DLB_CPU_ISA parsing, clamping, exit 2) is in tests/smoke_isa.cmake.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <string>
#include <vector>

#include "kernels/common/verify.h"
#include "kernels/cpu/bf16_cast.h"
#include "kernels/cpu/bf16_gemm.h"
#include "kernels/cpu/conv2d/conv2d.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/nn_ops.h"
#include "kernels/cpu/threads.h"
#include "kernels/cpu/peak.h"

using namespace dlb;
using cpu::Isa;

namespace {

const Isa kLevels[] = {Isa::scalar, Isa::avx2, Isa::avx512, Isa::avx512_bf16};

class EveryIsa : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (static_cast<int>(GetParam()) > static_cast<int>(cpu::isa_cap()))
      GTEST_SKIP() << "level " << cpu::isa_name(GetParam()) << " is above this process's cap "
                   << cpu::isa_name(cpu::isa_cap()) << " (CPU has " << cpu::isa_name(cpu::isa_detected()) << ")";
    limit_ = std::make_unique<cpu::IsaLimit>(GetParam());
  }
  void TearDown() override { limit_.reset(); }
  std::unique_ptr<cpu::IsaLimit> limit_;
};

std::string level_name(const ::testing::TestParamInfo<Isa>& i) { return cpu::isa_name(i.param); }

}  // namespace

TEST(Isa, NamesParseBothWays) {
  for (Isa i : kLevels) {
    Isa back;
    ASSERT_TRUE(cpu::parse_isa(cpu::isa_name(i), &back));
    EXPECT_EQ(back, i);
  }
  Isa x;
  EXPECT_FALSE(cpu::parse_isa("avx3", &x));
  EXPECT_FALSE(cpu::parse_isa("", &x));
  EXPECT_FALSE(cpu::parse_isa("auto", &x));  // auto is the env's spelling of "no cap", not a level
  EXPECT_STREQ(cpu::isa_onednn_name(Isa::avx512_bf16), "AVX512_CORE_BF16");
}

TEST(Isa, CapNeverAboveTheCpuAndLimitOnlyLowers) {
  EXPECT_LE(static_cast<int>(cpu::isa_cap()), static_cast<int>(cpu::isa_detected()));
  EXPECT_EQ(cpu::isa_active(), cpu::isa_cap());
  {
    cpu::IsaLimit lim(Isa::scalar);
    EXPECT_EQ(cpu::isa_active(), Isa::scalar);
    EXPECT_FALSE(cpu::isa_allows(Isa::avx2));
    {
      cpu::IsaLimit up(Isa::avx512_bf16);  // a limit cannot lift the cap
      EXPECT_EQ(cpu::isa_active(), cpu::isa_cap());
    }
    EXPECT_EQ(cpu::isa_active(), Isa::scalar);
  }
  EXPECT_EQ(cpu::isa_active(), cpu::isa_cap());
}

TEST_P(EveryIsa, ConvFastPathsMatchReference) {
  // lecture-conv2-like shapes: the direct AVX-512 kernels at avx512 (k % 16 == 0), the AVX2 ones at
  // avx2 (and for k = 8), im2col at scalar; plus padding.
  for (const auto& sh : {Conv2dShape::make(2, 32, 14, 14, 16, 5, 5), Conv2dShape::make(2, 8, 9, 11, 16, 3, 3, 1),
                         Conv2dShape::make(2, 24, 14, 14, 8, 5, 5),
                         // k <= c/4: backward-data as a forward conv with 64 output channels (the
                         // AVX-512 kernel's 32-channel blocks), 3 filter rows (a 1-row remainder)
                         Conv2dShape::make(2, 64, 9, 9, 16, 3, 3),
                         // by dy columns (no zero border): 32 + 16 channels at avx512, 16 x 3 at
                         // avx2, rows of 7 + 7 + 6 pixels, padding 1; and 16 + 16 + 8 channels
                         // (the last block one vector; at avx512 too, where c % 16 != 0)
                         Conv2dShape::make(2, 48, 11, 20, 8, 5, 5, 1), Conv2dShape::make(2, 40, 9, 23, 8, 3, 3, 1),
                         // lecture conv1 layout with K = 48 > 32: at avx2 and avx512 our GEMMs on
                         // im2col with the pixels in the lanes (forward, backward-filter), at scalar
                         // im2col + sgemm; and the forward one with stride 2 and padding, PQ = 42 (a
                         // masked vector at either width)
                         Conv2dShape::make(3, 3, 20, 19, 48, 5, 5), Conv2dShape::make(2, 3, 13, 11, 44, 3, 3, 1, 2)}) {
    std::vector<float> x(sh.x_size()), w(sh.w_size()), b(sh.k), dy(sh.y_size());
    fill_uniform(x.data(), x.size(), 1), fill_uniform(w.data(), w.size(), 2);
    fill_uniform(b.data(), b.size(), 3), fill_uniform(dy.data(), dy.size(), 4);
    std::vector<float> ws, y(sh.y_size()), dx(sh.x_size()), dw(sh.w_size()), db(sh.k);
    std::vector<double> ry(sh.y_size()), rdx(sh.x_size()), rdw(sh.w_size()), rdb(sh.k);
    cpu::conv2d_forward_im2col(sh, x.data(), w.data(), b.data(), y.data(), ws);
    cpu::conv2d_backward_data_im2col(sh, dy.data(), w.data(), dx.data(), ws);
    cpu::conv2d_backward_filter_im2col(sh, x.data(), dy.data(), dw.data(), db.data(), ws);
    cpu::conv2d_forward_direct(sh, x.data(), w.data(), b.data(), ry.data());
    cpu::conv2d_backward_data_direct(sh, dy.data(), w.data(), rdx.data());
    cpu::conv2d_backward_filter_direct(sh, x.data(), dy.data(), rdw.data(), rdb.data());
    const double tol = default_tolerance(DType::fp32);
    EXPECT_LT(max_rel_err(y.data(), ry.data(), y.size()), tol) << sh.str();
    EXPECT_LT(max_rel_err(dx.data(), rdx.data(), dx.size()), tol) << sh.str();
    EXPECT_LT(max_rel_err(dw.data(), rdw.data(), dw.size()), tol) << sh.str();
    EXPECT_LT(max_rel_err(db.data(), rdb.data(), db.size()), tol) << sh.str();
  }
}

// Conv + ReLU + MaxPool2d fused per image (conv2d_forward_relu_pool, conv2d_backward_filter_relu_pool)
// against the same ops unfused: y and arg bit for bit (the same GEMM kernel), dW and db within rounding
// where the backward runs over the pool's winners alone, bit for bit where it makes the dense
// gradient (the same GEMM, the same task split of the batch); on the kernel threads and on one; pools
// of 2 and 3 with ragged edges (P, Q not multiples); RGB and grey first layers (the winners-only
// kernels: AVX-512 under an avx512 cap, AVX2 under avx2). Where no fused kernel runs (scalar), fusable says
// so and the fused calls throw.
TEST_P(EveryIsa, ConvReluPoolFusedMatchesUnfused) {
  for (const auto& [sh, k] : std::vector<std::pair<Conv2dShape, int>>{{Conv2dShape::make(3, 3, 20, 19, 48, 5, 5), 2},
                                                                      {Conv2dShape::make(2, 2, 12, 40, 36, 3, 3), 2},
                                                                      {Conv2dShape::make(5, 3, 32, 32, 128, 5, 5), 2},
                                                                      {Conv2dShape::make(2, 3, 13, 17, 40, 3, 3), 3},
                                                                      {Conv2dShape::make(3, 1, 14, 13, 48, 5, 5), 2},
                                                                      {Conv2dShape::make(2, 1, 11, 12, 48, 3, 3), 2}}) {
    SCOPED_TRACE(sh.str() + " pool " + std::to_string(k));
    const bool fusable = cpu::conv2d_relu_pool_fusable(sh, k);
    EXPECT_EQ(fusable, cpu::isa_allows(Isa::avx2));
    const int P = sh.p(), Q = sh.q(), pp = P / k, pq = Q / k;
    const std::size_t pooled = std::size_t(sh.n) * sh.k * pp * pq;
    std::vector<float> x(sh.x_size()), w(sh.w_size()), b(sh.k), g(pooled);
    fill_uniform(x.data(), x.size(), 1), fill_uniform(w.data(), w.size(), 2);
    fill_uniform(b.data(), b.size(), 3), fill_uniform(g.data(), g.size(), 4);
    std::vector<float> y(pooled), fy(pooled), dense(sh.y_size()), dyd(sh.y_size()), ws;
    std::vector<std::int32_t> arg(pooled), farg(pooled);
    std::vector<float> dw(sh.w_size()), db(sh.k), fdw(sh.w_size()), fdb(sh.k);
    if (!fusable) {
      EXPECT_THROW(cpu::conv2d_forward_relu_pool(sh, x.data(), w.data(), b.data(), k, fy.data(), farg.data()),
                   std::invalid_argument);
      EXPECT_THROW(cpu::conv2d_backward_filter_relu_pool(sh, x.data(), k, g.data(), y.data(), arg.data(), fdw.data(),
                                                         fdb.data()),
                   std::invalid_argument);
      continue;
    }
    for (int threads : {cpu::kernel_threads(), 1}) {
      SCOPED_TRACE("threads " + std::to_string(threads));
      cpu::KernelThreadsLimit lim(threads);
      cpu::conv2d_forward_im2col(sh, x.data(), w.data(), b.data(), dense.data(), ws);
      cpu::maxpool2d_relu_forward(dense.data(), y.data(), arg.data(), sh.n, sh.k, P, Q, k);
      cpu::maxpool2d_relu_backward(g.data(), y.data(), arg.data(), dyd.data(), sh.n, sh.k, P, Q, k);
      cpu::conv2d_backward_filter_im2col(sh, x.data(), dyd.data(), dw.data(), db.data(), ws);
      std::fill(fy.begin(), fy.end(), 123.f), std::fill(fdw.begin(), fdw.end(), 123.f);
      std::fill(fdb.begin(), fdb.end(), 123.f);
      cpu::conv2d_forward_relu_pool(sh, x.data(), w.data(), b.data(), k, fy.data(), farg.data());
      cpu::conv2d_backward_filter_relu_pool(sh, x.data(), k, g.data(), fy.data(), farg.data(), fdw.data(), fdb.data());
      EXPECT_EQ(farg, arg);
      EXPECT_EQ(0, std::memcmp(fy.data(), y.data(), sizeof(float) * pooled));
      // The backward over the pool's winners alone (C x R of 3 or 1 x 3 or 5) sums in another order
      // than the dense GEMM: within rounding. The dense route (here C = 2) is the same GEMM: exact.
      if (sh.c == 2) {
        EXPECT_EQ(0, std::memcmp(fdw.data(), dw.data(), sizeof(float) * dw.size()));
        EXPECT_EQ(0, std::memcmp(fdb.data(), db.data(), sizeof(float) * db.size()));
      }
      const std::vector<double> udw(dw.begin(), dw.end()), udb(db.begin(), db.end());
      EXPECT_LT(max_rel_err(fdw.data(), udw.data(), fdw.size()), default_tolerance(DType::fp32));
      EXPECT_LT(max_rel_err(fdb.data(), udb.data(), fdb.size()), default_tolerance(DType::fp32));
    }
    // and against the fp64 reference, through the dense gradient the pool hands back
    std::vector<double> rdw(sh.w_size()), rdb(sh.k);
    cpu::conv2d_backward_filter_direct(sh, x.data(), dyd.data(), rdw.data(), rdb.data());
    EXPECT_LT(max_rel_err(fdw.data(), rdw.data(), fdw.size()), default_tolerance(DType::fp32));
    EXPECT_LT(max_rel_err(fdb.data(), rdb.data(), fdb.size()), default_tolerance(DType::fp32));
  }
  EXPECT_FALSE(cpu::conv2d_relu_pool_fusable(Conv2dShape::make(2, 3, 13, 11, 44, 3, 3, 1, 2), 2));  // stride 2
  EXPECT_FALSE(cpu::conv2d_relu_pool_fusable(Conv2dShape::make(2, 32, 14, 14, 16, 5, 5), 2));       // K <= 32
  EXPECT_FALSE(cpu::conv2d_relu_pool_fusable(Conv2dShape::make(2, 3, 6, 6, 48, 5, 5), 3));          // 2x2 < pool
}

// Both gradients over a mostly-zero dy (conv2d_backward_sparse_dy): dW, db and dX against the fp64
// references where it runs (avx512 and up; C multiples of 16 in chunks of 128, 64, 32 and 16; 5x5
// and 3x3; dy one in five nonzero, and a pool's winners' pattern), on the kernel threads and on one.
// It declines, writing nothing, for a dense dy, padding, a C off 16, and below avx512.
TEST_P(EveryIsa, SparseDyBackwardMatchesReference) {
  const bool runs = cpu::isa_allows(Isa::avx512);
  for (const Conv2dShape& sh : {Conv2dShape::make(3, 128, 14, 14, 16, 5, 5), Conv2dShape::make(2, 240, 9, 8, 20, 3, 3),
                                Conv2dShape::make(5, 16, 11, 13, 8, 5, 5)}) {
    SCOPED_TRACE(sh.str());
    std::vector<float> x(sh.x_size()), w(sh.w_size()), dy(sh.y_size());
    fill_uniform(x.data(), x.size(), 11), fill_uniform(w.data(), w.size(), 12), fill_uniform(dy.data(), dy.size(), 13);
    std::vector<double> rdw(sh.w_size()), rdb(sh.k), rdx(sh.x_size());
    for (int pattern = 0; pattern < 2; ++pattern) {
      SCOPED_TRACE(pattern ? "pool winners" : "one in five");
      std::vector<float> sdy(dy);
      for (std::size_t i = 0; i < sdy.size(); ++i) {
        const std::size_t q = i % sh.q(), p = (i / sh.q()) % sh.p(), k = i / (std::size_t(sh.p()) * sh.q());
        const bool keep = pattern ? (p % 2 == (k + q / 2) % 2 && q % 2 == (k / 2 + p / 2) % 2) : i % 5 == 2;
        if (!keep) sdy[i] = 0.f;
      }
      cpu::conv2d_backward_filter_direct(sh, x.data(), sdy.data(), rdw.data(), rdb.data());
      cpu::conv2d_backward_data_direct(sh, sdy.data(), w.data(), rdx.data());
      for (int threads : {cpu::kernel_threads(), 1}) {
        SCOPED_TRACE("threads " + std::to_string(threads));
        cpu::KernelThreadsLimit lim(threads);
        std::vector<float> dw(sh.w_size(), 7.f), db(sh.k, 7.f), dx(sh.x_size(), 7.f);
        ASSERT_EQ(runs, cpu::conv2d_backward_sparse_dy(sh, x.data(), w.data(), sdy.data(), dw.data(), db.data(), dx.data()));
        if (!runs) {
          EXPECT_EQ(dw, std::vector<float>(sh.w_size(), 7.f));
          EXPECT_EQ(dx, std::vector<float>(sh.x_size(), 7.f));
          continue;
        }
        EXPECT_LT(max_rel_err(dw.data(), rdw.data(), dw.size()), default_tolerance(DType::fp32));
        EXPECT_LT(max_rel_err(db.data(), rdb.data(), db.size()), default_tolerance(DType::fp32));
        EXPECT_LT(max_rel_err(dx.data(), rdx.data(), dx.size()), default_tolerance(DType::fp32));
        std::vector<float> dw2(sh.w_size(), 7.f);  // no dx, no db: the filter gradient alone
        ASSERT_TRUE(cpu::conv2d_backward_sparse_dy(sh, x.data(), w.data(), sdy.data(), dw2.data(), nullptr, nullptr));
        EXPECT_EQ(dw2, dw);
      }
    }
    std::vector<float> dw(sh.w_size(), 7.f), dx(sh.x_size(), 7.f);  // dense dy: declined
    EXPECT_FALSE(cpu::conv2d_backward_sparse_dy(sh, x.data(), w.data(), dy.data(), dw.data(), nullptr, dx.data()));
    EXPECT_EQ(dw, std::vector<float>(sh.w_size(), 7.f));
  }
  std::vector<float> z(64 * 64 * 25, 0.f);
  EXPECT_FALSE(cpu::conv2d_backward_sparse_dy(Conv2dShape::make(1, 16, 6, 6, 4, 3, 3, 1), z.data(), z.data(), z.data(),
                                              z.data(), nullptr, z.data()));  // padding
  EXPECT_FALSE(cpu::conv2d_backward_sparse_dy(Conv2dShape::make(1, 24, 6, 6, 4, 3, 3), z.data(), z.data(), z.data(),
                                              z.data(), nullptr, z.data()));  // C off 16
}

// The two sparse backwards again under bf16 autocast (vdpbf16ps, two terms an instruction): fed
// unrounded inputs, they must give the fp64 gradients of the bf16-rounded x, w and dy (the products
// exact, fp32 sums: dW within fp32's tolerance; dx rounded to bf16, so within half a bf16 step),
// while the gradients of the unrounded inputs are measurably off (so the rounding is seen); db sums
// dy as given. Odd counts of pool windows and of
// nonzeros leave a term without a partner. Below avx512_bf16 they decline, writing nothing.
std::vector<float> rounded_bf16(const std::vector<float>& v) {
  std::vector<float> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = cpu::bf16_to_fp32_ref(cpu::fp32_to_bf16_ref(v[i]));
  return r;
}

TEST_P(EveryIsa, Bf16SparseBackwardsMatchRoundedReference) {
  const bool runs = cpu::isa_allows(Isa::avx512_bf16);
  const double tol = default_tolerance(DType::fp32);
  for (const auto& [sh, k] : std::vector<std::pair<Conv2dShape, int>>{{Conv2dShape::make(3, 3, 20, 19, 48, 5, 5), 2},
                                                                      {Conv2dShape::make(2, 3, 19, 19, 48, 5, 5), 2},
                                                                      {Conv2dShape::make(3, 1, 14, 13, 48, 5, 5), 2},
                                                                      {Conv2dShape::make(2, 1, 11, 12, 48, 3, 3), 2},
                                                                      {Conv2dShape::make(2, 3, 13, 17, 64, 3, 3), 3}}) {
    SCOPED_TRACE("winners " + sh.str() + " pool " + std::to_string(k));
    ASSERT_TRUE(cpu::conv2d_relu_pool_fusable(sh, k) || !runs);
    const std::size_t pooled = std::size_t(sh.n) * sh.k * (sh.p() / k) * (sh.q() / k);
    std::vector<float> x(sh.x_size()), w(sh.w_size()), b(sh.k), g(pooled), y(pooled), dense(sh.y_size());
    std::vector<std::int32_t> arg(pooled);
    fill_uniform(x.data(), x.size(), 21), fill_uniform(w.data(), w.size(), 22);
    fill_uniform(b.data(), b.size(), 23), fill_uniform(g.data(), g.size(), 24);
    const std::vector<float> xr = rounded_bf16(x), gr = rounded_bf16(g);
    std::vector<float> ws;
    cpu::conv2d_forward_im2col(sh, xr.data(), w.data(), b.data(), dense.data(), ws);
    cpu::maxpool2d_relu_forward(dense.data(), y.data(), arg.data(), sh.n, sh.k, sh.p(), sh.q(), k);
    for (int threads : {cpu::kernel_threads(), 1}) {
      SCOPED_TRACE("threads " + std::to_string(threads));
      cpu::KernelThreadsLimit lim(threads);
      std::vector<float> dw(sh.w_size(), 7.f), db(sh.k, 7.f);
      ASSERT_EQ(runs, cpu::conv2d_backward_filter_relu_pool_bf16(sh, x.data(), k, g.data(), y.data(), arg.data(),
                                                                 dw.data(), db.data()));
      if (!runs) {
        EXPECT_EQ(dw, std::vector<float>(sh.w_size(), 7.f));
        EXPECT_EQ(db, std::vector<float>(sh.k, 7.f));
        continue;
      }
      std::vector<double> rdw(sh.w_size()), rdb(sh.k), udw(sh.w_size()), udb(sh.k);
      std::vector<float> dyd(sh.y_size()), dyu(sh.y_size());
      cpu::maxpool2d_relu_backward(gr.data(), y.data(), arg.data(), dyd.data(), sh.n, sh.k, sh.p(), sh.q(), k);
      cpu::maxpool2d_relu_backward(g.data(), y.data(), arg.data(), dyu.data(), sh.n, sh.k, sh.p(), sh.q(), k);
      cpu::conv2d_backward_filter_direct(sh, xr.data(), dyd.data(), rdw.data(), rdb.data());
      cpu::conv2d_backward_filter_direct(sh, x.data(), dyu.data(), udw.data(), udb.data());
      EXPECT_LT(max_rel_err(dw.data(), rdw.data(), dw.size()), tol);
      EXPECT_GT(max_rel_err(dw.data(), udw.data(), dw.size()), 10 * tol);  // the inputs were rounded
      EXPECT_LT(max_rel_err(db.data(), udb.data(), db.size()), tol);       // db: dy as given
    }
  }
  for (const Conv2dShape& sh : {Conv2dShape::make(3, 128, 14, 14, 16, 5, 5), Conv2dShape::make(2, 240, 9, 8, 20, 3, 3),
                                Conv2dShape::make(5, 16, 11, 13, 8, 5, 5)}) {
    SCOPED_TRACE("sparse dy " + sh.str());
    std::vector<float> x(sh.x_size()), w(sh.w_size()), dy(sh.y_size());
    fill_uniform(x.data(), x.size(), 31), fill_uniform(w.data(), w.size(), 32), fill_uniform(dy.data(), dy.size(), 33);
    for (std::size_t i = 0; i < dy.size(); ++i) {  // a pool's winners' pattern
      const std::size_t q = i % sh.q(), p = (i / sh.q()) % sh.p(), kk = i / (std::size_t(sh.p()) * sh.q());
      if (!(p % 2 == (kk + q / 2) % 2 && q % 2 == (kk / 2 + p / 2) % 2)) dy[i] = 0.f;
    }
    const std::vector<float> xr = rounded_bf16(x), wr = rounded_bf16(w), dyr = rounded_bf16(dy);
    std::vector<double> rdw(sh.w_size()), rdb(sh.k), rdx(sh.x_size()), udw(sh.w_size()), udb(sh.k);
    cpu::conv2d_backward_filter_direct(sh, xr.data(), dyr.data(), rdw.data(), rdb.data());
    cpu::conv2d_backward_data_direct(sh, dyr.data(), wr.data(), rdx.data());
    cpu::conv2d_backward_filter_direct(sh, x.data(), dy.data(), udw.data(), udb.data());
    for (int threads : {cpu::kernel_threads(), 1}) {
      SCOPED_TRACE("threads " + std::to_string(threads));
      cpu::KernelThreadsLimit lim(threads);
      std::vector<float> dw(sh.w_size(), 7.f), db(sh.k, 7.f), dx(sh.x_size(), 7.f);
      ASSERT_EQ(runs, cpu::conv2d_backward_sparse_dy_bf16(sh, x.data(), w.data(), dy.data(), dw.data(), db.data(),
                                                          dx.data()));
      EXPECT_EQ(runs, cpu::conv2d_backward_sparse_dy_shape(sh, true));
      if (!runs) {
        EXPECT_EQ(dw, std::vector<float>(sh.w_size(), 7.f));
        EXPECT_EQ(dx, std::vector<float>(sh.x_size(), 7.f));
        continue;
      }
      EXPECT_LT(max_rel_err(dw.data(), rdw.data(), dw.size()), tol);
      EXPECT_EQ(dx, rounded_bf16(dx));  // dx comes back in bf16, as autocast's conv returns it
      EXPECT_LT(max_rel_err(dx.data(), rdx.data(), dx.size()), 1.0 / 256);  // half a bf16 step, and the sum's order
      EXPECT_GT(max_rel_err(dw.data(), udw.data(), dw.size()), 10 * tol);
      EXPECT_LT(max_rel_err(db.data(), udb.data(), db.size()), tol);
    }
  }
}

// The fused bf16 forward of a first conv + ReLU + MaxPool2d (conv2d_forward_relu_pool_bf16) against
// the fp32 convolution of the bf16-rounded x and w, each output rounded to bf16, then ReLU + pool:
// y bf16-exact and within one bf16 step of it (the same exact products summed in another order
// may round the other way), the winners the same but where such a step made or broke a tie. Odd
// numbers of taps (75, 27, 25, 9) leave a tap without a partner. Below avx512_bf16 it declines.
TEST_P(EveryIsa, Bf16FusedForwardMatchesRoundedFp32) {
  const bool runs = cpu::isa_allows(Isa::avx512_bf16);
  for (const auto& [sh, k] : std::vector<std::pair<Conv2dShape, int>>{{Conv2dShape::make(3, 3, 20, 19, 48, 5, 5), 2},
                                                                      {Conv2dShape::make(2, 3, 32, 32, 128, 5, 5), 2},
                                                                      {Conv2dShape::make(3, 1, 14, 13, 48, 5, 5), 2},
                                                                      {Conv2dShape::make(2, 1, 11, 12, 48, 3, 3), 2},
                                                                      {Conv2dShape::make(2, 3, 13, 17, 64, 3, 3), 3}}) {
    SCOPED_TRACE(sh.str() + " pool " + std::to_string(k));
    EXPECT_EQ(runs, cpu::conv2d_relu_pool_bf16_fusable(sh, k));
    const std::size_t pooled = std::size_t(sh.n) * sh.k * (sh.p() / k) * (sh.q() / k);
    std::vector<float> x(sh.x_size()), w(sh.w_size()), b(sh.k), dense(sh.y_size()), ref(pooled), ws;
    std::vector<std::int32_t> ref_arg(pooled);
    fill_uniform(x.data(), x.size(), 41), fill_uniform(w.data(), w.size(), 42), fill_uniform(b.data(), b.size(), 43);
    const std::vector<float> xr = rounded_bf16(x), wr = rounded_bf16(w);
    cpu::conv2d_forward_im2col(sh, xr.data(), wr.data(), b.data(), dense.data(), ws);
    dense = rounded_bf16(dense);
    cpu::maxpool2d_relu_forward(dense.data(), ref.data(), ref_arg.data(), sh.n, sh.k, sh.p(), sh.q(), k);
    for (int threads : {cpu::kernel_threads(), 1}) {
      SCOPED_TRACE("threads " + std::to_string(threads));
      cpu::KernelThreadsLimit lim(threads);
      std::vector<float> y(pooled, 7.f);
      std::vector<std::int32_t> arg(pooled, -1);
      std::vector<std::uint16_t> y16(pooled, 7);  // y again, bf16 in nChw16c
      ASSERT_EQ(runs, cpu::conv2d_forward_relu_pool_bf16(sh, x.data(), w.data(), b.data(), k, y.data(), arg.data(),
                                                         y16.data()));
      if (!runs) {
        EXPECT_EQ(y, std::vector<float>(pooled, 7.f));
        continue;
      }
      EXPECT_EQ(y, rounded_bf16(y));
      const std::size_t hw = std::size_t(sh.p() / k) * (sh.q() / k);
      for (std::size_t i = 0; i < pooled; ++i) {  // NCHW index i -> nChw16c
        const std::size_t img = i / (sh.k * hw), ch = i / hw % sh.k, pix = i % hw;
        ASSERT_EQ(y16[((img * (sh.k / 16) + ch / 16) * hw + pix) * 16 + ch % 16], cpu::fp32_to_bf16_ref(y[i])) << i;
      }
      double worst = 0;
      std::size_t moved = 0;
      for (std::size_t i = 0; i < pooled; ++i) {
        worst = std::max(worst, std::fabs(double(y[i]) - ref[i]) / std::max(1e-3, std::fabs(double(ref[i]))));
        moved += arg[i] != ref_arg[i] && ref[i] > 0.f;
      }
      EXPECT_LE(worst, 1.0 / 128);  // one bf16 step
      EXPECT_LE(moved, pooled / 200) << moved << " of " << pooled << " winners moved";
    }
  }
}

TEST_P(EveryIsa, CastsMatchReferencesBitForBit) {
  const bool simd = cpu::isa_allows(Isa::avx2);
  EXPECT_EQ(cpu::bf16_cast_path() == "scalar", !simd) << cpu::bf16_cast_path();
  std::vector<float> x(1001);
  fill_uniform(x.data(), x.size(), 7);
  x[3] = 1e38f, x[5] = -0.0f, x[8] = 1e-40f;
  std::vector<std::uint16_t> h(x.size()), f(x.size());
  cpu::cast_fp32_to_bf16(x.data(), h.data(), x.size());
  cpu::cast_fp32_to_fp16(x.data(), f.data(), x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(h[i], cpu::fp32_to_bf16_ref(x[i])) << i;
    ASSERT_EQ(f[i], cpu::fp32_to_fp16_ref(x[i])) << i;
  }
  std::vector<float> back(x.size()), back16(x.size());
  cpu::cast_bf16_to_fp32(h.data(), back.data(), h.size());
  cpu::cast_fp16_to_fp32(f.data(), back16.data(), f.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(cpu::f32_bits(back[i]), cpu::f32_bits(cpu::bf16_to_fp32_ref(h[i]))) << i;
    ASSERT_EQ(cpu::f32_bits(back16[i]), cpu::f32_bits(cpu::fp16_to_fp32_ref(f[i]))) << i;
  }
}

TEST_P(EveryIsa, Bf16GemmLauncherMatchesReference) {
  // avx512_bf16 runs native bf16 (oneDNN) where built with it; below, widen+sgemm, and the path says why.
  const std::string path = cpu::bf16_gemm_path();
  if (!cpu::isa_allows(Isa::avx512_bf16)) {
    EXPECT_NE(path.find("widen+sgemm"), std::string::npos) << path;
  }
  const long m = 45, n = 33, k = 70;
  std::vector<float> af(m * k), bf(k * n);
  fill_uniform(af.data(), af.size(), 3), fill_uniform(bf.data(), bf.size(), 4);
  std::vector<std::uint16_t> a(af.size()), b(bf.size());
  cpu::cast_fp32_to_bf16(af.data(), a.data(), a.size());
  cpu::cast_fp32_to_bf16(bf.data(), b.data(), b.size());
  for (bool tb : {false, true}) {
    std::vector<float> c(m * n, 1.0f), r(m * n, 1.0f);
    cpu::Bf16GemmArgs g;
    g.trans_b = tb, g.m = m, g.n = n, g.k = k, g.a = a.data(), g.b = b.data(), g.beta = 0.5f, g.c = r.data();
    cpu::bf16_gemm_forward_ref(g);
    g.c = c.data();
    cpu::bf16_gemm(g);
    EXPECT_LT(max_rel_err(c.data(), r.data(), c.size()), 1e-5) << path << " tb=" << tb;
  }
}

// A dense layer's bf16 products (dense_bf16_forward / _backward) against the fp64 loops on the
// bf16-rounded operands; the backward that reads the forward's casts (cast_by_forward) gives the same
// bits as the one that casts again, at every level (each bf16 GEMM path).
TEST_P(EveryIsa, DenseBf16BackwardReusesTheForwardsCasts) {
  const long m = 19, n = 37, k = 24;  // x [m x k], W [n x k], dy [m x n]
  std::vector<float> x(m * k), w(n * k), dy(m * n);
  fill_uniform(x.data(), x.size(), 5), fill_uniform(w.data(), w.size(), 6), fill_uniform(dy.data(), dy.size(), 7);
  auto r16 = [](float v) { return double(cpu::bf16_to_fp32_ref(cpu::fp32_to_bf16_ref(v))); };
  std::vector<float> y_ref(m * n), dw_ref(n * k), dx_ref(m * k);
  for (long i = 0; i < m; ++i)
    for (long j = 0; j < n; ++j) {
      double acc = 0;
      for (long c = 0; c < k; ++c) acc += r16(x[i * k + c]) * r16(w[j * k + c]);
      y_ref[i * n + j] = float(acc);
    }
  for (long j = 0; j < n; ++j)
    for (long c = 0; c < k; ++c) {
      double acc = 0;
      for (long i = 0; i < m; ++i) acc += r16(dy[i * n + j]) * r16(x[i * k + c]);
      dw_ref[j * k + c] = float(0.5 + acc);  // dW accumulates into what it holds (0.5)
    }
  for (long i = 0; i < m; ++i)
    for (long c = 0; c < k; ++c) {
      double acc = 0;
      for (long j = 0; j < n; ++j) acc += r16(dy[i * n + j]) * r16(w[j * k + c]);
      dx_ref[i * k + c] = float(acc);
    }
  std::vector<float> y(m * n), dw[2], dx[2];
  for (int reuse = 0; reuse < 2; ++reuse) {
    cpu::Bf16Scratch s;
    cpu::dense_bf16_forward(m, n, k, x.data(), w.data(), y.data(), s);
    EXPECT_LT(max_rel_err(y.data(), y_ref.data(), y.size()), 1e-5) << cpu::bf16_gemm_path();
    dw[reuse].assign(n * k, 0.5f), dx[reuse].assign(m * k, 0.f);
    cpu::dense_bf16_backward(m, n, k, x.data(), w.data(), dy.data(), dw[reuse].data(), dx[reuse].data(), s, reuse == 1);
    EXPECT_LT(max_rel_err(dw[reuse].data(), dw_ref.data(), dw_ref.size()), 1e-5) << "dW, reuse " << reuse;
    EXPECT_LT(max_rel_err(dx[reuse].data(), dx_ref.data(), dx_ref.size()), 1e-5) << "dx, reuse " << reuse;
  }
  EXPECT_EQ(std::memcmp(dw[0].data(), dw[1].data(), dw[0].size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(dx[0].data(), dx[1].data(), dx[0].size() * sizeof(float)), 0);
}

// The replica step's two kernels (models/replicas.h): zero_streaming clears exactly [0, n) from any
// alignment (the non-temporal body and the plain head and tail), and weighted_sum gives the plain
// loop's bits (products rounded, then summed in part order) at every length, in place too.
TEST_P(EveryIsa, ReplicaStepKernelsMatchPlainLoops) {
  std::vector<float> buf(300);
  for (std::size_t off : {0, 1, 3, 16}) {
    for (std::size_t n : {0, 1, 5, 16, 17, 64, 131, 250}) {
      std::fill(buf.begin(), buf.end(), 7.f);
      cpu::zero_streaming(buf.data() + off, n);
      for (std::size_t i = 0; i < buf.size(); ++i)
        ASSERT_EQ(buf[i], i >= off && i < off + n ? 0.f : 7.f) << "offset " << off << ", n " << n << ", element " << i;
    }
  }
  const float w[4] = {0.25f, 1.f / 3, 0.1f, 0.7f};
  for (int parts = 1; parts <= 4; ++parts) {
    for (std::size_t n : {1, 15, 16, 33, 257}) {
      std::vector<std::vector<float>> p(parts, std::vector<float>(n + 1));
      for (int k = 0; k < parts; ++k) fill_uniform(p[k].data(), p[k].size(), 40 + k);
      std::vector<const float*> ptr;
      for (int k = 0; k < parts; ++k) ptr.push_back(p[k].data() + 1);  // not 64-byte aligned
      std::vector<float> out(n), want(n);
      for (std::size_t i = 0; i < n; ++i) {
        volatile float acc = ptr[0][i] * w[0];  // volatile: no contraction into an FMA
        for (int k = 1; k < parts; ++k) {
          volatile float prod = ptr[k][i] * w[k];
          acc = acc + prod;
        }
        want[i] = acc;
      }
      cpu::weighted_sum(out.data(), ptr.data(), w, parts, n);
      EXPECT_EQ(std::memcmp(out.data(), want.data(), n * sizeof(float)), 0) << parts << " parts, n " << n;
      std::vector<float> first = p[0];  // in place: out is the first part
      cpu::weighted_sum(p[0].data() + 1, ptr.data(), w, parts, n);
      EXPECT_EQ(std::memcmp(p[0].data() + 1, want.data(), n * sizeof(float)), 0) << "in place, " << parts << " parts, n " << n;
      EXPECT_EQ(p[0][0], first[0]);  // nothing before out written
    }
  }
}

TEST_P(EveryIsa, PeakProbeUsesTheLevel) {
  const cpu::CpuPeaks p = cpu::measure_peaks(1);
  const char* want = cpu::isa_allows(Isa::avx512) ? "avx512f" : cpu::isa_allows(Isa::avx2) ? "avx2+fma" : "scalar";
  EXPECT_EQ(p.fma_isa, want);
  EXPECT_GT(p.fp32_gflops, 0.0);
}

INSTANTIATE_TEST_SUITE_P(Levels, EveryIsa, ::testing::ValuesIn(kLevels), level_name);
