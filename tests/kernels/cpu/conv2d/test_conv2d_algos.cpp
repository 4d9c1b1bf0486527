// Every row of the CPU conv dispatch table (kernels/cpu/conv2d/algos.cpp) against the one fp64
// reference (reference.cpp): each algorithm, forced, at every ISA level this CPU runs, on every shape
// of the list below it applies to, on the kernel threads and on one. A new row is tested here without
// a new test, and fails if no shape of the list exercises it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/verify.h"
#include "kernels/cpu/bf16_cast.h"
#include "kernels/cpu/conv2d/conv2d.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/threads.h"

using namespace dlb;
using cpu::Algo;
using cpu::ConvDir;
using cpu::Isa;

namespace {

const Isa kLevels[] = {Isa::scalar, Isa::avx2, Isa::avx512, Isa::avx512_bf16};
const int kPools[] = {2, 3};  // the fused rows' pool windows

// Shapes chosen so that every row applies to some of them: odd sizes, padding, strides, few and
// many channels, first layers (C 1 and 3) and the lecture's layouts.
std::vector<Conv2dShape> shapes() {
  using S = Conv2dShape;
  return {S::make(1, 1, 5, 5, 1, 3, 3), S::make(2, 3, 7, 9, 4, 3, 3, 1, 1), S::make(3, 2, 11, 10, 5, 5, 5, 2, 2),
          S::make(2, 4, 8, 8, 6, 1, 1), S::make(2, 4, 9, 9, 3, 1, 1, 0, 2), S::make(1, 3, 13, 13, 8, 7, 7, 3, 2),
          S::make(2, 3, 4, 4, 2, 3, 3, 2, 1), S::make(3, 3, 32, 32, 16, 5, 5), S::make(2, 24, 14, 14, 6, 5, 5),
          S::make(2, 32, 9, 9, 4, 3, 3, 1), S::make(2, 32, 14, 14, 16, 5, 5), S::make(3, 9, 11, 13, 24, 3, 7),
          S::make(1, 16, 8, 9, 8, 2, 2), S::make(2, 4, 10, 10, 32, 4, 4), S::make(2, 8, 9, 11, 16, 3, 3, 1),
          S::make(1, 6, 7, 8, 8, 5, 5, 2), S::make(3, 3, 20, 19, 48, 5, 5), S::make(2, 2, 12, 40, 36, 3, 3),
          S::make(2, 3, 13, 11, 44, 3, 3, 1, 2), S::make(2, 48, 11, 20, 8, 5, 5, 1),
          S::make(2, 40, 9, 23, 8, 3, 3, 1), S::make(3, 24, 14, 14, 6, 5, 5), S::make(2, 64, 9, 9, 16, 3, 3),
          S::make(2, 3, 13, 17, 40, 3, 3), S::make(3, 1, 14, 13, 48, 5, 5), S::make(2, 1, 11, 12, 48, 3, 3),
          S::make(3, 128, 14, 14, 16, 5, 5), S::make(2, 240, 9, 8, 20, 3, 3), S::make(5, 16, 11, 13, 8, 5, 5),
          S::make(2, 3, 32, 32, 128, 5, 5), S::make(2, 3, 16, 16, 32, 5, 5), S::make(2, 36, 10, 10, 8, 3, 3, 2),
          S::make(2, 3, 14, 14, 36, 3, 5), S::make(2, 32, 10, 10, 8, 4, 4), S::make(2, 36, 10, 10, 8, 3, 3)};
}

bool fused(ConvDir d) {
  return d == ConvDir::relu_pool_forward || d == ConvDir::relu_pool_backward_filter ||
         d == ConvDir::relu_pool_forward_bf16 || d == ConvDir::relu_pool_backward_filter_bf16;
}
bool bf16(ConvDir d) {
  return d == ConvDir::relu_pool_forward_bf16 || d == ConvDir::relu_pool_backward_filter_bf16 ||
         d == ConvDir::sparse_dy_bf16;
}
std::vector<float> rounded_bf16(const std::vector<float>& v) {
  std::vector<float> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = cpu::bf16_to_fp32_ref(cpu::fp32_to_bf16_ref(v[i]));
  return r;
}

// relu(maxpool_k(conv)) from the fp64 conv output, and the dense conv gradient of a pooled dy
// (nonzero at each window's argmax where the pooled output is positive).
std::vector<double> relu_pool_ref(const Conv2dShape& sh, const std::vector<double>& conv, int k) {
  const int P = sh.p(), Q = sh.q(), PP = P / k, QQ = Q / k;
  std::vector<double> y(std::size_t(sh.n) * sh.k * PP * QQ);
  for (std::size_t plane = 0; plane < std::size_t(sh.n) * sh.k; ++plane)
    for (int i = 0; i < PP; ++i)
      for (int j = 0; j < QQ; ++j) {
        double m = -INFINITY;
        for (int a = 0; a < k; ++a)
          for (int b = 0; b < k; ++b) m = std::max(m, conv[(plane * P + i * k + a) * Q + j * k + b]);
        y[(plane * PP + i) * QQ + j] = std::max(m, 0.0);
      }
  return y;
}
std::vector<float> dense_dy(const Conv2dShape& sh, const std::vector<float>& dy, const std::vector<float>& y,
                            const std::vector<std::int32_t>& arg) {
  std::vector<float> d(sh.y_size(), 0.f);
  for (std::size_t i = 0; i < dy.size(); ++i)
    if (y[i] > 0.f) d[std::size_t(arg[i])] += dy[i];
  return d;
}

// db's reference: dy (as given, not rounded) summed per output channel.
std::vector<double> db_ref(const Conv2dShape& sh, const std::vector<float>& dy) {
  std::vector<double> db(sh.k, 0.0);
  const std::size_t pq = std::size_t(sh.p()) * sh.q();
  for (std::size_t i = 0; i < dy.size(); ++i) db[i / pq % sh.k] += dy[i];
  return db;
}

// Runs `a` (forced) on `sh` at the ISA in force and compares with the reference.
void check(Algo a, const Conv2dShape& sh, int k) {
  const ConvDir dir = cpu::algo_dir(a);
  const bool bf = bf16(dir);
  const double tol = default_tolerance(DType::fp32);
  std::vector<float> x(sh.x_size()), w(sh.w_size()), b(sh.k), dy(sh.y_size());
  fill_uniform(x.data(), x.size(), 21), fill_uniform(w.data(), w.size(), 22), fill_uniform(b.data(), b.size(), 23);
  fill_uniform(dy.data(), dy.size(), 24);
  const std::vector<float> xr = bf ? rounded_bf16(x) : x, wr = bf ? rounded_bf16(w) : w;
  std::vector<float> ws;
  switch (dir) {
    case ConvDir::forward: {
      std::vector<double> ref(sh.y_size());
      cpu::conv2d_forward_direct(sh, x.data(), w.data(), b.data(), ref.data());
      std::vector<float> y(sh.y_size(), NAN);
      cpu::conv2d_forward_im2col(sh, x.data(), w.data(), b.data(), y.data(), ws, a);
      EXPECT_LT(max_rel_err(y.data(), ref.data(), y.size()), tol);
      return;
    }
    case ConvDir::backward_data: {
      std::vector<double> ref(sh.x_size());
      cpu::conv2d_backward_data_direct(sh, dy.data(), w.data(), ref.data());
      std::vector<float> dx(sh.x_size(), NAN);
      cpu::conv2d_backward_data_im2col(sh, dy.data(), w.data(), dx.data(), ws, a);
      EXPECT_LT(max_rel_err(dx.data(), ref.data(), dx.size()), tol);
      return;
    }
    case ConvDir::backward_filter: {
      std::vector<double> rdw(sh.w_size()), rdb(sh.k);
      cpu::conv2d_backward_filter_direct(sh, x.data(), dy.data(), rdw.data(), rdb.data());
      std::vector<float> dw(sh.w_size(), NAN), db(sh.k, NAN);
      cpu::conv2d_backward_filter_im2col(sh, x.data(), dy.data(), dw.data(), db.data(), ws, a);
      EXPECT_LT(max_rel_err(dw.data(), rdw.data(), dw.size()), tol);
      EXPECT_LT(max_rel_err(db.data(), rdb.data(), db.size()), tol);
      return;
    }
    default: break;
  }
  if (fused(dir)) {
    // the forward's reference: fp64 conv of the (bf16-rounded) inputs, then ReLU + pool
    std::vector<double> conv(sh.y_size());
    cpu::conv2d_forward_direct(sh, xr.data(), wr.data(), b.data(), conv.data());
    const std::vector<double> ry = relu_pool_ref(sh, conv, k);
    std::vector<float> y(ry.size(), NAN);
    std::vector<std::int32_t> arg(ry.size(), -1);
    if (dir == ConvDir::relu_pool_forward || dir == ConvDir::relu_pool_forward_bf16) {
      if (dir == ConvDir::relu_pool_forward) {
        cpu::conv2d_forward_relu_pool(sh, x.data(), w.data(), b.data(), k, y.data(), arg.data(), a);
      } else {
        ASSERT_TRUE(
            cpu::conv2d_forward_relu_pool_bf16(sh, x.data(), w.data(), b.data(), k, y.data(), arg.data(), nullptr, a));
      }
      EXPECT_LT(max_rel_err(y.data(), ry.data(), y.size()), bf ? default_tolerance(DType::bf16) : tol);
      for (std::size_t i = 0; i < y.size(); ++i) ASSERT_TRUE(arg[i] >= 0 && std::size_t(arg[i]) < sh.y_size()) << i;
      return;
    }
    // backward-filter: from the default forward's y and arg, a pooled dy
    cpu::conv2d_forward_relu_pool(sh, x.data(), w.data(), b.data(), k, y.data(), arg.data());
    std::vector<float> pdy(y.size());
    fill_uniform(pdy.data(), pdy.size(), 25);
    const std::vector<float> d = dense_dy(sh, bf ? rounded_bf16(pdy) : pdy, y, arg);
    std::vector<double> rdw(sh.w_size()), unused(sh.k);
    cpu::conv2d_backward_filter_direct(sh, xr.data(), d.data(), rdw.data(), unused.data());
    const std::vector<double> rdb = db_ref(sh, dense_dy(sh, pdy, y, arg));
    std::vector<float> dw(sh.w_size(), NAN), db(sh.k, NAN);
    if (dir == ConvDir::relu_pool_backward_filter) {
      cpu::conv2d_backward_filter_relu_pool(sh, x.data(), k, pdy.data(), y.data(), arg.data(), dw.data(), db.data(), a);
    } else {
      ASSERT_TRUE(cpu::conv2d_backward_filter_relu_pool_bf16(sh, x.data(), k, pdy.data(), y.data(), arg.data(),
                                                             dw.data(), db.data(), a));
    }
    EXPECT_LT(max_rel_err(dw.data(), rdw.data(), dw.size()), tol);
    EXPECT_LT(max_rel_err(db.data(), rdb.data(), db.size()), tol);  // (bf16 too: db sums dy as given)
    return;
  }
  // sparse dy: one output in five nonzero
  for (std::size_t i = 0; i < dy.size(); ++i)
    if (i % 5 != 2) dy[i] = 0.f;
  const std::vector<float> dyr = bf ? rounded_bf16(dy) : dy;
  std::vector<double> rdw(sh.w_size()), unused(sh.k), rdx(sh.x_size());
  cpu::conv2d_backward_filter_direct(sh, xr.data(), dyr.data(), rdw.data(), unused.data());
  const std::vector<double> rdb = db_ref(sh, dy);
  cpu::conv2d_backward_data_direct(sh, dyr.data(), wr.data(), rdx.data());
  std::vector<float> dw(sh.w_size(), NAN), db(sh.k, NAN), dx(sh.x_size(), NAN);
  if (dir == ConvDir::sparse_dy) {
    ASSERT_TRUE(cpu::conv2d_backward_sparse_dy(sh, x.data(), w.data(), dy.data(), dw.data(), db.data(), dx.data(), a));
  } else {
    ASSERT_TRUE(
        cpu::conv2d_backward_sparse_dy_bf16(sh, x.data(), w.data(), dy.data(), dw.data(), db.data(), dx.data(), a));
  }
  EXPECT_LT(max_rel_err(dw.data(), rdw.data(), dw.size()), tol);
  EXPECT_LT(max_rel_err(dx.data(), rdx.data(), dx.size()), bf ? default_tolerance(DType::bf16) : tol);
  EXPECT_LT(max_rel_err(db.data(), rdb.data(), db.size()), tol);
}

std::vector<Algo> all_algos() {
  std::vector<Algo> v;
  for (int i = 1; i < static_cast<int>(Algo::count_); ++i)
    if (std::string(cpu::algo_name(Algo(i))) != "unavailable") v.push_back(Algo(i));
  return v;
}

class EveryAlgo : public ::testing::TestWithParam<Algo> {};

}  // namespace

TEST_P(EveryAlgo, MatchesReferenceAtEveryIsa) {
  const Algo a = GetParam();
  const ConvDir dir = cpu::algo_dir(a);
  int runs = 0, anywhere = 0;
  for (const Conv2dShape& sh : shapes())
    for (int k : kPools) {
      if (!fused(dir) && k != kPools[0]) continue;
      const int pk = fused(dir) ? k : 0;
      anywhere += cpu::algo_applies(a, sh, Isa::avx512_bf16, pk);
      for (Isa isa : kLevels) {
        if (static_cast<int>(isa) > static_cast<int>(cpu::isa_cap()) || !cpu::algo_applies(a, sh, isa, pk)) continue;
        cpu::IsaLimit lim(isa);
        for (int threads : {cpu::kernel_threads(), 1}) {
          SCOPED_TRACE(sh.str() + " pool " + std::to_string(pk) + " at " + cpu::isa_name(isa) + ", threads " +
                       std::to_string(threads));
          cpu::KernelThreadsLimit tl(threads);
          check(a, sh, pk);
          ++runs;
        }
      }
    }
  ASSERT_GT(anywhere, 0) << "no shape of the list takes " << cpu::algo_name(a) << ": add one";
  if (runs == 0) GTEST_SKIP() << cpu::algo_name(a) << " needs an ISA above this process's cap";
}

INSTANTIATE_TEST_SUITE_P(Table, EveryAlgo, ::testing::ValuesIn(all_algos()),
                         [](const ::testing::TestParamInfo<Algo>& i) { return std::string(cpu::algo_name(i.param)); });

// choose() picks a row of the asked direction that applies, the entry points' default; a row forced
// on a shape it does not take is refused.
TEST(ConvAlgos, ChooseAppliesAndForcedMisfitThrows) {
  for (const Conv2dShape& sh : shapes())
    for (Isa isa : kLevels) {
      for (ConvDir d : {ConvDir::forward, ConvDir::backward_data, ConvDir::backward_filter}) {
        const Algo a = cpu::choose(sh, d, isa);
        ASSERT_NE(a, Algo::auto_) << sh.str();  // the im2col rows take every shape
        EXPECT_EQ(cpu::algo_dir(a), d);
        EXPECT_TRUE(cpu::algo_applies(a, sh, isa));
      }
    }
  EXPECT_STREQ(cpu::algo_name(Algo::auto_), "auto");
  const Conv2dShape strided = Conv2dShape::make(2, 3, 13, 11, 44, 3, 3, 1, 2);  // stride 2: no direct kernel
  std::vector<float> x(strided.x_size(), 1.f), w(strided.w_size(), 1.f), dw(strided.w_size());
  std::vector<float> ws;
  EXPECT_THROW(cpu::conv2d_backward_filter_im2col(strided, x.data(), x.data(), dw.data(), nullptr, ws,
                                                  Algo::bwd_filter_direct_avx2),
               std::invalid_argument);
  EXPECT_THROW(cpu::conv2d_forward_im2col(strided, x.data(), w.data(), nullptr, x.data(), ws, Algo::bwd_data_im2col),
               std::invalid_argument);  // a row of another direction
}
