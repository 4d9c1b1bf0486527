// Verification primitives: relative error against a reference and the tolerance policy per dtype
// (DESIGN.md: fp32 ~1e-5 relative, tf32 ~1e-3, bf16/fp16 ~1e-2).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace dlb {

enum class DType { fp64, fp32, tf32, fp16, bf16 };

DType parse_dtype(const std::string& s);  // throws UsageError on an unknown name
const char* dtype_name(DType t);

// Default relative tolerance for results computed in `t` (accumulation in fp32 or better).
double default_tolerance(DType t);

// max_i |got_i - ref_i| / max(|ref|_inf, tiny): the error relative to the reference's scale, which
// stays meaningful where single reference values are near zero (cancellation in sums).
double max_rel_err(const float* got, const double* ref, std::size_t n);
double max_rel_err(const float* got, const float* ref, std::size_t n);
double max_rel_err(const double* got, const double* ref, std::size_t n);

// Outcome of running a case once and comparing it with its reference.
struct CheckResult {
  bool ok = false;
  double max_rel_err = 0.0;
  double tolerance = 0.0;
  std::string message;  // empty when ok; else why (mismatch, NaN, ...)
};

// ok iff err is finite and <= tol; message filled on failure.
CheckResult judge(double err, double tol, const std::string& what = "");

// Deterministic pseudo-random fill in [-1, 1) (splitmix64), so CPU and GPU see the same inputs.
void fill_uniform(float* x, std::size_t n, std::uint64_t seed);

}  // namespace dlb
