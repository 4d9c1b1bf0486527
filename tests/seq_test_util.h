// Shared by the sequence-kernel tests (test_seq_*.cpp): random tensors in fp32 and their fp64
// copies, the ISA levels to run, and a central-difference gradient check of an fp64 reference.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/common/verify.h"
#include "kernels/cpu/isa.h"

namespace seqtest {

inline std::vector<float> rand_f(std::size_t n, std::uint64_t seed, float scale = 1.f) {
  std::vector<float> v(n);
  dlb::fill_uniform(v.data(), n, seed);
  for (float& x : v) x *= scale;
  return v;
}
inline std::vector<double> to_d(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// fn() at each ISA level this CPU runs (scalar, avx2, avx512), the level in force while it runs.
template <class F>
void each_isa(F&& fn) {
  using dlb::cpu::Isa;
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (static_cast<int>(isa) > static_cast<int>(dlb::cpu::isa_cap())) continue;
    dlb::cpu::IsaLimit lim(isa);
    SCOPED_TRACE(std::string("isa ") + dlb::cpu::isa_name(isa));
    fn();
  }
}

// max over the checked entries of |analytic - numeric| / max(max |analytic|, 1e-3): central
// differences of loss() in each entry of `x` (every entry up to `max_checks`, else a stride).
inline double gradcheck(std::vector<double>& x, const std::vector<double>& analytic,
                        const std::function<double()>& loss, int max_checks = 64, double h = 1e-6) {
  double scale = 1e-3;
  for (double a : analytic) scale = std::max(scale, std::abs(a));
  const std::size_t stride = std::max<std::size_t>(1, x.size() / max_checks);
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); i += stride) {
    const double keep = x[i];
    x[i] = keep + h;
    const double lp = loss();
    x[i] = keep - h;
    const double lm = loss();
    x[i] = keep;
    worst = std::max(worst, std::abs((lp - lm) / (2 * h) - analytic[i]) / scale);
  }
  return worst;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

constexpr double kFdTol = 1e-6;  // fp64 central differences with h = 1e-6: ~1e-9 when right

}  // namespace seqtest
