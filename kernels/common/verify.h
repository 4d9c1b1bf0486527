// Verification primitives: relative error against a reference and the tolerance policy per dtype
// (DESIGN.md: fp32 ~1e-5 relative, tf32 2 * 2^-10 (~2e-3: truncated 10-bit mantissas), bf16/fp16 ~1e-2).
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

// ||got - ref||_2 / ||ref||_2, accumulated over calls of add() (several steps of one tensor): the
// measure for gradients that are sums with cancellation, where single elements and even the largest
// one carry a large relative rounding error while the vector as a whole is right (AMP gradients).
struct L2Error {
  double num = 0, den = 0;
  void add(const float* got, const float* ref, std::size_t n);
  double rel() const;  // 0 for 0/0; +inf when the reference is all zero and got is not
};

// Gradients in a half type against fp32's: the largest per-tensor L2Error a correct autocast step
// reaches. A bf16 weight gradient is a bf16-rounded sum whose terms largely cancel: 1-12% measured
// (amp suite, bf16 steps of the four seed models); a wrong scale, a lost or negated term gives 0.3-2.
constexpr double kHalfGradientL2Tolerance = 0.25;

// The worst of several relative errors (a step's loss, then each gradient), with the name of the
// tensor that gave it. A NaN sticks: std::max(worst, NaN) keeps `worst`, so a NaN gradient would
// otherwise pass a check whose other tensors are right.
struct WorstError {
  double err = 0;
  std::string where;
  void add(double e, const std::string& what);
  // |got - want| / |want| under the name "the loss".
  void loss(double got, double want);
  // "(worst: <where>)" for a check's message; empty while nothing was added.
  std::string said() const;
};

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
