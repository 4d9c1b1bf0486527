// NoisyRetry (see stop_noisy.h).
#include "harness/run/stop_noisy.h"

#include <algorithm>
#include <cmath>

#include "harness/run/constants.h"

namespace dlb::harness {

double coefficient_of_variation(const std::vector<double>& times) {
  const std::size_t n = times.size();
  if (n < 2) return 0;
  double mean = 0;
  for (double t : times) mean += t;
  mean /= double(n);
  if (!(mean > 0)) return 0;
  double ss = 0;
  for (double t : times) ss += (t - mean) * (t - mean);
  return std::sqrt(ss / double(n - 1)) / mean;
}

int NoisyRetry::wanted(const std::vector<double>& times) const {
  if (static_cast<int>(times.size()) < n_) return n_;
  const std::vector<double> first(times.begin(), times.begin() + n_);
  return coefficient_of_variation(first) > max_cv_ ? std::min(cap_, timing::kNoisyRetryFactor * n_) : n_;
}

}  // namespace dlb::harness
