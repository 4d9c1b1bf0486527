// Statistics for run comparison (see stats.h).
#include "harness/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace dlb::stats {

double median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double mean(const std::vector<double>& v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean(v);
  double s2 = 0;
  for (double x : v) s2 += (x - m) * (x - m);
  return std::sqrt(s2 / static_cast<double>(v.size() - 1));
}

double cv(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean(v);
  return m > 0 ? stddev(v) / m : 0;
}

double geomean(const std::vector<double>& v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  double s = 0;
  for (double x : v) {
    if (!(x > 0)) return std::numeric_limits<double>::quiet_NaN();
    s += std::log(x);
  }
  return std::exp(s / static_cast<double>(v.size()));
}

double robust_cv(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = median(v);
  if (!(m > 0)) return 0;
  std::vector<double> dev(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) dev[i] = std::fabs(v[i] - m);
  return 1.4826 * median(dev) / m;
}

double normal_sf(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

double mann_whitney_min_p(std::size_t n, std::size_t m) {
  if (n == 0 || m == 0) return 1;
  // C(n+m, n) as a double: exact far beyond any repetition count we see.
  double c = 1;
  for (std::size_t i = 1; i <= std::min(n, m); ++i) c = c * static_cast<double>(n + m - std::min(n, m) + i) / static_cast<double>(i);
  return std::min(1.0, 2.0 / c);
}

namespace {

// Midranks (1-based; tied values share the average of their ranks) of the pooled sample, plus the
// tie term sum(t^3 - t) over groups of t tied values.
struct Ranked {
  std::vector<double> rank;  // rank of pooled[i]
  double tie_term = 0;
};

Ranked midranks(const std::vector<double>& pooled) {
  const std::size_t N = pooled.size();
  std::vector<std::size_t> order(N);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return pooled[a] < pooled[b]; });
  Ranked r;
  r.rank.assign(N, 0);
  for (std::size_t i = 0; i < N;) {
    std::size_t j = i;
    while (j + 1 < N && pooled[order[j + 1]] == pooled[order[i]]) ++j;
    const double avg = 0.5 * static_cast<double>(i + j) + 1.0;  // ranks i+1 .. j+1
    for (std::size_t k = i; k <= j; ++k) r.rank[order[k]] = avg;
    const double t = static_cast<double>(j - i + 1);
    r.tie_term += t * t * t - t;
    i = j + 1;
  }
  return r;
}

}  // namespace

MannWhitney mann_whitney_u(const std::vector<double>& x, const std::vector<double>& y, std::size_t exact_limit) {
  MannWhitney res;
  const std::size_t n = x.size(), m = y.size();
  if (n == 0 || m == 0) return res;
  if (m < n) {  // the DP below counts subsets of the smaller sample; p is symmetric, U_x = nm - U_y
    res = mann_whitney_u(y, x, exact_limit);
    res.u = static_cast<double>(n) * static_cast<double>(m) - res.u;
    return res;
  }
  std::vector<double> pooled(x);
  pooled.insert(pooled.end(), y.begin(), y.end());
  const std::size_t N = n + m;
  const Ranked rk = midranks(pooled);
  double rank_sum_x = 0;
  for (std::size_t i = 0; i < n; ++i) rank_sum_x += rk.rank[i];
  res.u = rank_sum_x - 0.5 * static_cast<double>(n) * static_cast<double>(n + 1);
  if (rk.tie_term == static_cast<double>(N) * N * N - static_cast<double>(N)) {  // all tied: p = 1 either way
    res.exact = n * m <= exact_limit;
    return res;
  }

  if (n * m <= exact_limit) {
    // Exact: under H0 every choice of which n of the N pooled values belong to x is equally likely
    // (C(N, n) of them). Count the choices by their rank sum with a subset-sum DP over the pooled
    // values (x is the smaller sample here): count[k][s] = number of ways to pick k values whose doubled ranks sum to s. Doubled
    // midranks are integers, so ties are exact too. Cost N * n * (sum of ranks) -- tiny for n*m <= 400.
    std::vector<int> w(N);
    for (std::size_t i = 0; i < N; ++i) w[i] = static_cast<int>(std::lround(2 * rk.rank[i]));
    std::vector<int> sorted_w(w);
    std::sort(sorted_w.rbegin(), sorted_w.rend());
    const int total = std::accumulate(sorted_w.begin(), sorted_w.begin() + static_cast<std::ptrdiff_t>(n), 0);  // largest possible sum
    const std::size_t k_max = n;
    std::vector<std::vector<double>> count(k_max + 1, std::vector<double>(static_cast<std::size_t>(total) + 1, 0.0));
    count[0][0] = 1;
    for (std::size_t i = 0; i < N; ++i)
      for (std::size_t k = std::min(k_max, i + 1); k >= 1; --k)
        for (int s = total; s >= w[i]; --s) count[k][s] += count[k - 1][s - w[i]];
    const int observed = static_cast<int>(std::lround(2 * rank_sum_x));
    double all = 0, le = 0, ge = 0;
    for (int s = 0; s <= total; ++s) {
      const double c = count[k_max][s];
      all += c;
      if (s <= observed) le += c;
      if (s >= observed) ge += c;
    }
    res.p = std::min(1.0, 2.0 * std::min(le, ge) / all);
    res.exact = true;
    return res;
  }

  // Normal approximation: E[U] = nm/2, Var[U] = nm/12 * ((N+1) - sum(t^3-t) / (N(N-1))), with a
  // continuity correction of 1/2.
  const double nm = static_cast<double>(n) * static_cast<double>(m);
  const double var = nm / 12.0 * ((N + 1.0) - rk.tie_term / (static_cast<double>(N) * (N - 1.0)));
  if (!(var > 0)) return res;
  const double z = std::max(0.0, std::fabs(res.u - nm / 2) - 0.5) / std::sqrt(var);
  res.p = std::min(1.0, 2.0 * normal_sf(z));
  return res;
}

}  // namespace dlb::stats
