// Tests for harness/stats: summaries, exact Mann-Whitney p-values computed by hand, the exact DP
// against brute-force enumeration, the normal approximation against the exact distribution, and
// the test's behaviour on simulated benchmark repetitions (false-positive rate, power).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <numeric>
#include <random>
#include <vector>

#include "harness/stats.h"

namespace st = dlb::stats;

TEST(Stats, MedianMeanCvGeomean) {
  EXPECT_DOUBLE_EQ(st::median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(st::median({4, 1, 3, 2}), 2.5);
  EXPECT_TRUE(std::isnan(st::median({})));
  EXPECT_DOUBLE_EQ(st::mean({1, 2, 3, 6}), 3);
  EXPECT_NEAR(st::stddev({2, 4, 4, 4, 5, 5, 7, 9}), std::sqrt(32.0 / 7), 1e-12);
  EXPECT_DOUBLE_EQ(st::cv({5}), 0);
  EXPECT_NEAR(st::cv({90, 110}), std::sqrt(200.0) / 100, 1e-12);
  EXPECT_NEAR(st::geomean({1, 4, 16}), 4, 1e-12);
  EXPECT_TRUE(std::isnan(st::geomean({1, 0})));
  // robust cv: MAD of {98,99,100,101,250} around 100 is 1 -> 1.4826%; the outlier does not count.
  EXPECT_NEAR(st::robust_cv({98, 99, 100, 101, 250}), 0.014826, 1e-12);
  EXPECT_GT(st::cv({98, 99, 100, 101, 250}), 0.5);
}

// Exact p-values worked out by hand from the rank-sum distribution.
TEST(MannWhitney, ExactHandComputed) {
  // 3 v 3, completely separated: 1 of C(6,3) = 20 arrangements in each tail -> p = 2/20.
  auto r = st::mann_whitney_u({1, 2, 3}, {4, 5, 6});
  EXPECT_TRUE(r.exact);
  EXPECT_DOUBLE_EQ(r.u, 0);
  EXPECT_NEAR(r.p, 0.1, 1e-12);

  // 5 v 5, completely separated: p = 2 / C(10,5) = 2/252.
  r = st::mann_whitney_u({6, 7, 8, 9, 10}, {1, 2, 3, 4, 5});
  EXPECT_DOUBLE_EQ(r.u, 25);
  EXPECT_NEAR(r.p, 2.0 / 252, 1e-12);

  // 3 v 3 interleaved, U = 3: the counts of U = 0..9 are 1,1,2,3,3,3,3,2,1,1, so
  // P(U <= 3) = 7/20 and p = 2 * 7/20 = 0.7.
  r = st::mann_whitney_u({1, 3, 5}, {2, 4, 6});
  EXPECT_DOUBLE_EQ(r.u, 3);
  EXPECT_NEAR(r.p, 0.7, 1e-12);

  // Ties: x = {1,2,2}, y = {2,3,4}; midranks 1, 3,3,3, 5, 6; doubled rank sum of x = 14. Of the 20
  // subsets of 3, the doubled sums are 14 (x3), 18 (x4), 20 (x3), 22 (x3), 24 (x4), 28 (x3), so
  // P(sum <= 14) = 3/20 and p = 0.3; U = 7 - 6 = 1.
  r = st::mann_whitney_u({1, 2, 2}, {2, 3, 4});
  EXPECT_TRUE(r.exact);
  EXPECT_DOUBLE_EQ(r.u, 1);
  EXPECT_NEAR(r.p, 0.3, 1e-12);
}

TEST(MannWhitney, DegenerateSamples) {
  EXPECT_DOUBLE_EQ(st::mann_whitney_u({}, {1, 2}).p, 1);
  EXPECT_DOUBLE_EQ(st::mann_whitney_u({1, 2}, {}).p, 1);
  EXPECT_DOUBLE_EQ(st::mann_whitney_u({5, 5, 5}, {5, 5}).p, 1);       // all tied
  EXPECT_DOUBLE_EQ(st::mann_whitney_u({5, 5, 5}, {5, 5}, 0).p, 1);    // ... also in the approximation
  EXPECT_DOUBLE_EQ(st::mann_whitney_u({1}, {2}).p, 1);                // 1 v 1: 2 * 1/2
}

TEST(MannWhitney, SymmetricAndRankInvariant) {
  const std::vector<double> x = {3.1, 2.7, 9.0, 4.4, 4.4}, y = {1.0, 2.7, 0.5, 3.3, 8.8, 2.2, 4.4};
  const auto a = st::mann_whitney_u(x, y), b = st::mann_whitney_u(y, x);
  EXPECT_NEAR(a.p, b.p, 1e-12);
  EXPECT_DOUBLE_EQ(a.u + b.u, 35);
  // Only ranks matter: a monotone transform (log, scaling) changes nothing.
  std::vector<double> lx, ly;
  for (double v : x) lx.push_back(1e3 * std::log(v));
  for (double v : y) ly.push_back(1e3 * std::log(v));
  EXPECT_NEAR(st::mann_whitney_u(lx, ly).p, a.p, 1e-12);
}

TEST(MannWhitney, MinimumReachableP) {
  EXPECT_NEAR(st::mann_whitney_min_p(3, 3), 0.1, 1e-12);
  EXPECT_NEAR(st::mann_whitney_min_p(3, 4), 2.0 / 35, 1e-12);
  EXPECT_NEAR(st::mann_whitney_min_p(5, 5), 2.0 / 252, 1e-12);
  EXPECT_NEAR(st::mann_whitney_min_p(5, 10), 2.0 / 3003, 1e-12);
  EXPECT_DOUBLE_EQ(st::mann_whitney_min_p(0, 5), 1);
}

// The DP against brute force: enumerate every way to split the pooled sample, on small random
// samples drawn from few distinct values (many ties).
TEST(MannWhitney, ExactMatchesBruteForceEnumeration) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> val(0, 4), size(1, 6);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = size(rng), m = size(rng);
    std::vector<double> x(n), y(m);
    for (auto& v : x) v = val(rng);
    for (auto& v : y) v = val(rng);
    std::vector<double> pooled(x);
    pooled.insert(pooled.end(), y.begin(), y.end());
    const int N = n + m;
    // U of a subset (as x) = pairs (a in subset, b outside) with a > b, ties 1/2.
    auto u_of = [&](unsigned mask) {
      double u = 0;
      for (int i = 0; i < N; ++i)
        for (int j = 0; j < N; ++j)
          if ((mask >> i & 1) && !(mask >> j & 1)) u += pooled[i] > pooled[j] ? 1 : pooled[i] == pooled[j] ? 0.5 : 0;
      return u;
    };
    const double u_obs = u_of((1u << n) - 1);
    double le = 0, ge = 0, all = 0;
    for (unsigned mask = 0; mask < (1u << N); ++mask) {
      if (__builtin_popcount(mask) != n) continue;
      const double u = u_of(mask);
      all += 1;
      le += u <= u_obs + 1e-9;
      ge += u >= u_obs - 1e-9;
    }
    const double p_brute = std::min(1.0, 2 * std::min(le, ge) / all);
    const auto r = st::mann_whitney_u(x, y);
    ASSERT_TRUE(r.exact);
    EXPECT_DOUBLE_EQ(r.u, u_obs);
    // All tied is defined as p = 1 (the brute force agrees: both tails hold everything).
    EXPECT_NEAR(r.p, p_brute, 1e-12) << "trial " << trial << " n=" << n << " m=" << m;
  }
}

TEST(MannWhitney, NormalApproximationHandComputed) {
  // 30 v 30 separated: U = 0, mean 450, variance 30*30*61/12 = 4575, continuity correction 1/2.
  std::vector<double> x(30), y(30);
  std::iota(x.begin(), x.end(), 1.0);
  std::iota(y.begin(), y.end(), 31.0);
  const auto r = st::mann_whitney_u(x, y);
  EXPECT_FALSE(r.exact);
  EXPECT_DOUBLE_EQ(r.u, 0);
  EXPECT_NEAR(r.p, 2 * st::normal_sf(449.5 / std::sqrt(4575.0)), 1e-15);
  EXPECT_GT(r.p, 2e-11);
  EXPECT_LT(r.p, 4e-11);
  EXPECT_NEAR(st::normal_sf(1.959963984540054), 0.025, 1e-12);
}

// The tie correction by hand: x = {1,1,2}, y = {2,3,3}: midranks 1.5,1.5 | 3.5,3.5 | 5.5,5.5; rank sum
// of x 6.5 -> U = 0.5; E[U] = 4.5; three pairs of ties: sum(t^3 - t) = 18, so
// Var[U] = 9/12 * (7 - 18/30) = 4.8 (4.5 without ties: 9/12 * 7 = 5.25); z = (4 - 1/2) / sqrt(4.8).
TEST(MannWhitney, NormalApproximationTieCorrection) {
  const auto r = st::mann_whitney_u({1, 1, 2}, {2, 3, 3}, 0);
  EXPECT_FALSE(r.exact);
  EXPECT_DOUBLE_EQ(r.u, 0.5);
  EXPECT_NEAR(r.p, 2 * st::normal_sf(3.5 / std::sqrt(4.8)), 1e-15);
}

// The approximation agrees with the exact distribution at 15 v 15 (where both are available), for
// continuous samples and for times quantised to a coarse grid (some ties). With very heavy ties
// (4 distinct values in 30) the exact distribution is lumpy and the two differ by up to ~0.1, which
// is why small samples always get the exact one.
TEST(MannWhitney, NormalApproximationCloseToExact) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> noise(0, 1);
  double worst_continuous = 0, worst_grid = 0;
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<double> x(15), y(15);
    const bool grid = trial % 2;
    const double shift = 0.25 * (trial % 4);
    for (auto& v : x) v = noise(rng);
    for (auto& v : y) v = noise(rng) + shift;
    if (grid)
      for (auto* s : {&x, &y})
        for (auto& v : *s) v = std::round(v * 4) / 4;  // ~16 distinct values
    const auto exact = st::mann_whitney_u(x, y, 1000);
    const auto approx = st::mann_whitney_u(x, y, 0);
    ASSERT_TRUE(exact.exact);
    ASSERT_FALSE(approx.exact);
    double& worst = grid ? worst_grid : worst_continuous;
    worst = std::max(worst, std::fabs(exact.p - approx.p));
  }
  EXPECT_LT(worst_continuous, 0.01);
  EXPECT_LT(worst_grid, 0.03);
}

namespace {

// Benchmark-like repetitions: `median` microseconds with relative noise `cv`, plus (when
// `outliers`) a 10% chance of a preempted repetition 30% slower.
std::vector<double> reps(std::mt19937_64& rng, int n, double median, double cv, bool outliers = false) {
  std::normal_distribution<double> z(0, 1);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<double> v(n);
  for (auto& t : v) {
    t = median * (1 + cv * z(rng));
    if (outliers && u(rng) < 0.1) t *= 1.3;
  }
  return v;
}

double flag_rate(int n, double slowdown, double cv, bool outliers, bool need_threshold, std::uint64_t seed) {
  const double alpha = 0.05, threshold = 0.05;
  std::mt19937_64 rng(seed);
  int flagged = 0;
  const int trials = 2000;
  for (int i = 0; i < trials; ++i) {
    const auto base = reps(rng, n, 100, cv, outliers);
    const auto neu = reps(rng, n, 100 * (1 + slowdown), cv, outliers);
    const auto r = st::mann_whitney_u(neu, base);
    const bool beyond = st::median(neu) / st::median(base) - 1 > threshold;
    flagged += r.p < alpha && (!need_threshold || beyond);
  }
  return static_cast<double>(flagged) / trials;
}

}  // namespace

// Identical distributions: a significant difference (either direction) at most alpha of the time.
// 2000 trials: the binomial standard error at 5% is 0.5%, so +1.5% is a 3-sigma margin.
TEST(MannWhitneySimulation, IdenticalDistributionsFlagAtMostAlpha) {
  // The default 5 repetitions a side (exact test: the attainable level is 2*4/252 = 3.2%).
  const double r5 = flag_rate(5, 0.0, 0.02, false, false, 1);
  EXPECT_LE(r5, 0.05 + 0.015) << r5;
  EXPECT_GT(r5, 0.01) << r5;  // and it does fire sometimes: the test is not inert
  // Heavy right tail (preempted repetitions): the rank test does not care about the shape.
  const double r5o = flag_rate(5, 0.0, 0.02, true, false, 2);
  EXPECT_LE(r5o, 0.05 + 0.015) << r5o;
  // Unequal sizes (the runner doubles the repetitions of a noisy case): 5 v 10.
  std::mt19937_64 rng(3);
  int flagged = 0;
  for (int i = 0; i < 2000; ++i) flagged += st::mann_whitney_u(reps(rng, 10, 100, 0.02), reps(rng, 5, 100, 0.02)).p < 0.05;
  EXPECT_LE(flagged / 2000.0, 0.065);
  // Large samples: the normal approximation (25 * 25 > 400).
  const double r25 = flag_rate(25, 0.0, 0.02, true, false, 4);
  EXPECT_LE(r25, 0.05 + 0.015) << r25;
  std::cout << "false-positive rate: 5 v 5 " << r5 << ", with outliers " << r5o << ", 5 v 10 " << flagged / 2000.0 << ", 25 v 25 " << r25 << "\n";
}

// A 10% slowdown with the default 5 repetitions and realistic noise (cv 2%) is caught: significant
// AND the median change beyond the 5% threshold, in >= 95% of the trials.
TEST(MannWhitneySimulation, TenPercentSlowdownCaught) {
  const double power = flag_rate(5, 0.10, 0.02, false, true, 5);
  EXPECT_GE(power, 0.95) << power;
  // With preempted repetitions (10% of them 30% slow, more than the effect) 5 a side lose power:
  // one slow BASE repetition outranks all of NEW. The runner redoes a noisy case (cv > 5%) with 10
  // repetitions, and 10 a side catch most of it again.
  const double power5 = flag_rate(5, 0.10, 0.02, true, true, 6);
  const double power10 = flag_rate(10, 0.10, 0.02, true, true, 6);
  EXPECT_GE(power10, 0.90) << power10;
  std::cout << "power at +10%, cv 2%: 5 v 5 " << power << "; with outliers 5 v 5 " << power5 << ", 10 v 10 " << power10 << "\n";
  EXPECT_GT(power10, power5);
}
