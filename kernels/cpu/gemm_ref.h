// Reference matrix products and their verification, shared by the matmul cases and the tests.
// All matrices are row-major: A is m x k, B is k x n, C is m x n (leading dimensions k, n, n).
// Small products are checked entry by entry against an fp64 product; large ones by a
// Freivalds-style check (C x against A (B x) in fp64 for random x, O(mn + nk + mk)) plus a few
// exact fp64 rows, so that a single wrong block or a wrong row is caught too.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/common/verify.h"

namespace dlb::cpu {

// C = A B in fp64 (plain triple loop, i-k-j order). The reference every other GEMM is judged by.
void gemm_reference_fp64(const float* a, const float* b, double* c, long m, long n, long k);

// One fp64 row i of A B (n values).
void gemm_reference_row_fp64(const float* a, const float* b, double* row, long i, long n, long k);

// Largest m*n*k checked entry by entry (about 0.1 s of fp64 on one core); above it, Freivalds.
constexpr double kExactCheckMaxMNK = 64.0 * 1024 * 1024;

struct GemmCheckOptions {
  int vectors = 2;        // Freivalds random vectors
  int exact_rows = 4;     // rows of C also compared exactly (Freivalds mode)
  std::uint64_t seed = 12345;
  bool force_freivalds = false;  // tests: use the O(n^2) path even when small
};

// Max relative error of C against A B (verify.h's measure: max |diff| / max |ref|), exact for
// small sizes, Freivalds + sampled rows otherwise. Inputs are the values the kernel multiplied
// (for bf16/fp16 cases: the rounded inputs, widened to float).
double gemm_max_rel_err(const float* a, const float* b, const float* c, long m, long n, long k,
                        const GemmCheckOptions& opt = {});

// gemm_max_rel_err judged against the tolerance of `t` (verify.h), with the method in the message.
CheckResult check_gemm(const float* a, const float* b, const float* c, long m, long n, long k, DType t,
                       const GemmCheckOptions& opt = {});

// Round-to-nearest-even conversions used for the bf16/fp16 inputs (the reference multiplies the
// rounded values, so a half-precision case is judged only on its accumulation).
std::uint16_t float_to_bf16(float x);
float bf16_to_float(std::uint16_t h);
std::uint16_t float_to_fp16(float x);
float fp16_to_float(std::uint16_t h);

}  // namespace dlb::cpu
