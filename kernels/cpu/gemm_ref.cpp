// Reference GEMM and its verification (see gemm_ref.h).
#include "kernels/cpu/gemm_ref.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace dlb::cpu {

void gemm_reference_fp64(const float* a, const float* b, double* c, long m, long n, long k) {
  for (long i = 0; i < m; ++i) {
    double* ci = c + static_cast<std::size_t>(i) * n;
    std::fill(ci, ci + n, 0.0);
    for (long p = 0; p < k; ++p) {
      const double aip = a[static_cast<std::size_t>(i) * k + p];
      const float* bp = b + static_cast<std::size_t>(p) * n;
      for (long j = 0; j < n; ++j) ci[j] += aip * bp[j];
    }
  }
}

void gemm_reference_row_fp64(const float* a, const float* b, double* row, long i, long n, long k) {
  gemm_reference_fp64(a + static_cast<std::size_t>(i) * k, b, row, 1, n, k);
}

namespace {
// Deterministic values in [-1, 1) for the Freivalds vectors (splitmix64).
double uniform(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

bool all_finite(const float* c, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(c[i])) return false;
  return true;
}
}  // namespace

double gemm_max_rel_err(const float* a, const float* b, const float* c, long m, long n, long k,
                        const GemmCheckOptions& opt) {
  const std::size_t mn = static_cast<std::size_t>(m) * n;
  if (!all_finite(c, mn)) return std::numeric_limits<double>::infinity();
  if (!opt.force_freivalds && double(m) * n * k <= kExactCheckMaxMNK) {
    std::vector<double> ref(mn);
    gemm_reference_fp64(a, b, ref.data(), m, n, k);
    return max_rel_err(c, ref.data(), mn);
  }
  // Freivalds: with random x, (A B) x = A (B x); a wrong C gives C x != A (B x) with high
  // probability. O(mn + nk + mk) per vector instead of O(mnk).
  double worst = 0;
  std::uint64_t s = opt.seed;
  std::vector<double> x(n), bx(k), ref(m), got(m);
  for (int v = 0; v < opt.vectors; ++v) {
    for (auto& xi : x) xi = uniform(s);
    for (long p = 0; p < k; ++p) {
      const float* bp = b + static_cast<std::size_t>(p) * n;
      double acc = 0;
      for (long j = 0; j < n; ++j) acc += bp[j] * x[j];
      bx[p] = acc;
    }
    for (long i = 0; i < m; ++i) {
      const float* ai = a + static_cast<std::size_t>(i) * k;
      const float* ci = c + static_cast<std::size_t>(i) * n;
      double r = 0, g = 0;
      for (long p = 0; p < k; ++p) r += ai[p] * bx[p];
      for (long j = 0; j < n; ++j) g += ci[j] * x[j];
      ref[i] = r, got[i] = g;
    }
    worst = std::max(worst, max_rel_err(got.data(), ref.data(), m));
  }
  // A few exact rows (first, last, two in between): catches a wrong element that the projection
  // would average away.
  std::vector<double> row(n);
  for (int r = 0; r < opt.exact_rows && r < m; ++r) {
    const long i = opt.exact_rows == 1 ? 0 : static_cast<long>((static_cast<double>(m - 1) * r) / (opt.exact_rows - 1));
    gemm_reference_row_fp64(a, b, row.data(), i, n, k);
    worst = std::max(worst, max_rel_err(c + static_cast<std::size_t>(i) * n, row.data(), n));
  }
  return worst;
}

CheckResult check_gemm(const float* a, const float* b, const float* c, long m, long n, long k, DType t,
                       const GemmCheckOptions& opt) {
  const bool exact = !opt.force_freivalds && double(m) * n * k <= kExactCheckMaxMNK;
  const double err = gemm_max_rel_err(a, b, c, m, n, k, opt);
  return judge(err, default_tolerance(t), exact ? "fp64 reference" : "Freivalds check (fp64)");
}

std::uint16_t float_to_bf16(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<std::uint16_t>(u >> 16);
}

float bf16_to_float(std::uint16_t h) {
  const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

std::uint16_t float_to_fp16(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);      // NaN
  if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);     // overflow -> inf
  if (a < 0x38800000u) {                                                        // subnormal or zero
    if (a < 0x33000000u) return static_cast<std::uint16_t>(sign);
    const std::uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(a >> 23);  // value = mant24 * 2^(E-126) units of 2^-24
    std::uint32_t h = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<std::uint16_t>(sign | h);
  }
  std::uint32_t h = ((a >> 13) - (112u << 10));  // rebias 127 -> 15
  const std::uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

float fp16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t e = (h >> 10) & 0x1fu, mant = h & 0x3ffu, u;
  if (e == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: normalise
      int shift = 0;
      while (!(mant & 0x400u)) mant <<= 1, ++shift;
      mant &= 0x3ffu;
      u = sign | ((113u - shift) << 23) | (mant << 13);
    }
  } else if (e == 31) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((e + 112u) << 23) | (mant << 13);
  }
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

}  // namespace dlb::cpu
