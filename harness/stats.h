// Small statistics for comparing benchmark runs: summaries of repetitions (median, cv, geometric
// mean) and the Mann-Whitney U test (Wilcoxon rank-sum), the two-sample test `dlbench compare` uses.
//
// Why Mann-Whitney: benchmark repetitions are few (5 by default) and not normal (one preempted
// repetition is a long right tail), so a rank test that assumes nothing about the shape is the honest
// choice. With 5 repetitions a side the normal approximation is poor, so small samples get the exact
// permutation distribution of the rank sum, counted by dynamic programming (ties included: midranks).
#pragma once
#include <cstddef>
#include <vector>

namespace dlb::stats {

double median(std::vector<double> v);             // NaN when empty
double mean(const std::vector<double>& v);        // NaN when empty
double stddev(const std::vector<double>& v);      // sample standard deviation (n-1); 0 when n < 2
double cv(const std::vector<double>& v);          // stddev / mean; 0 when n < 2 or mean <= 0
double geomean(const std::vector<double>& v);     // of positive values; NaN when empty or any <= 0
// 1.4826 * median absolute deviation / median: the cv of normal data, but one preempted repetition
// does not move it. 0 when n < 2 or median <= 0.
double robust_cv(const std::vector<double>& v);

struct MannWhitney {
  double u = 0;        // U of the first sample: pairs (x_i, y_j) with x_i > y_j, a tie counts 1/2
  double p = 1;        // two-sided p-value for "x and y come from the same distribution"
  bool exact = false;  // p from the exact permutation distribution (else: normal approximation)
};

// Samples with n*m <= exact_limit get the exact distribution (two-sided p = 2 * the smaller tail,
// capped at 1); larger ones the normal approximation with tie correction and continuity correction.
// An empty sample, or all values tied, gives p = 1.
MannWhitney mann_whitney_u(const std::vector<double>& x, const std::vector<double>& y,
                           std::size_t exact_limit = 400);

// The smallest two-sided p-value samples of sizes n and m can reach (no ties: 2 / C(n+m, n)).
// With 3 repetitions a side it is 0.1, so no alpha below that can ever be reached.
double mann_whitney_min_p(std::size_t n, std::size_t m);

// Upper tail of the standard normal distribution, P(Z > z).
double normal_sf(double z);

}  // namespace dlb::stats
