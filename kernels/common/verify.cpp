// Verification primitives (see verify.h).
#include "kernels/common/verify.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "kernels/common/errors.h"

namespace dlb {

DType parse_dtype(const std::string& s) {
  if (s == "fp64") return DType::fp64;
  if (s == "fp32") return DType::fp32;
  if (s == "tf32") return DType::tf32;
  if (s == "fp16") return DType::fp16;
  if (s == "bf16") return DType::bf16;
  throw UsageError("unknown dtype '" + s + "' (expected fp32, tf32, fp16, bf16 or fp64)");
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::fp64: return "fp64";
    case DType::fp32: return "fp32";
    case DType::tf32: return "tf32";
    case DType::fp16: return "fp16";
    case DType::bf16: return "bf16";
  }
  return "?";
}

double default_tolerance(DType t) {
  switch (t) {
    case DType::fp64: return 1e-12;
    case DType::fp32: return 1e-5;
    // TF32 keeps 10 of fp32's 23 mantissa bits; Hopper truncates the inputs (no rounding), so each is
    // off by up to 2^-10 and a product by up to 2 * 2^-10 = 1.95e-3 (~8e-4 seen against 1e-3 before).
    case DType::tf32: return 2 * 0x1p-10;
    case DType::fp16:
    case DType::bf16: return 1e-2;
  }
  return 1e-5;
}

namespace {
template <class G, class R>
double rel_err(const G* got, const R* ref, std::size_t n) {
  double scale = 0.0, worst = 0.0;
  for (std::size_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(static_cast<double>(ref[i])));
  scale = std::max(scale, std::numeric_limits<double>::min());
  for (std::size_t i = 0; i < n; ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - static_cast<double>(ref[i]));
    if (!std::isfinite(d)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, d);
  }
  return worst / scale;
}
}  // namespace

double max_rel_err(const float* got, const double* ref, std::size_t n) { return rel_err(got, ref, n); }
double max_rel_err(const float* got, const float* ref, std::size_t n) { return rel_err(got, ref, n); }
double max_rel_err(const double* got, const double* ref, std::size_t n) { return rel_err(got, ref, n); }

void L2Error::add(const float* got, const float* ref, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const double d = double(got[i]) - double(ref[i]);
    num += d * d, den += double(ref[i]) * double(ref[i]);
  }
}

double L2Error::rel() const {
  if (den > 0) return std::sqrt(num / den);
  return num > 0 ? HUGE_VAL : 0.0;
}

void WorstError::add(double e, const std::string& what) {
  if (std::isnan(err)) return;
  if (where.empty() || !(e <= err)) err = e, where = what;
}

void WorstError::loss(double got, double want) { add(std::abs(got - want) / std::max(1e-12, std::abs(want)), "the loss"); }

std::string WorstError::said() const { return where.empty() ? std::string() : " (worst: " + where + ")"; }

CheckResult judge(double err, double tol, const std::string& what) {
  CheckResult r;
  r.max_rel_err = err;
  r.tolerance = tol;
  r.ok = std::isfinite(err) && err <= tol;
  if (!r.ok) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s%smax_rel_err %.3g exceeds tolerance %.3g", what.c_str(),
                  what.empty() ? "" : ": ", err, tol);
    r.message = std::isfinite(err) ? buf : (what.empty() ? std::string("non-finite output") : what + ": non-finite output");
  }
  return r;
}

void fill_uniform(float* x, std::size_t n, std::uint64_t seed) {
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    x[i] = static_cast<float>(static_cast<double>(z >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  }
}

}  // namespace dlb
