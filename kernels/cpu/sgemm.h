// The fp32 GEMM of the models' dense layers (Linear, the tied LM head, attention's projections):
// C = op(A) op(B) + beta C, row-major. One table (sgemm.cpp) picks the library for the process:
//   openblas  cblas_sgemm: multi-threaded by OpenBLAS's own team outside a parallel region
//   onednn    oneDNN's matmul (kernels/cpu/onednn/): rows or columns of C split over our kernel
//             threads, oneDNN single-threaded in each; deterministic for a given thread count
// auto (the default) takes onednn where oneDNN is built in and may use AVX-512 (DLB_CPU_ISA): on a
// Zen 4 it made a GPT-2 124M step (B 4, T 64, 2 threads) 13% and a batch-64 Transformer step (1
// thread) 8% shorter than OpenBLAS 0.3.21 (docs/notes/2026-11-26-sgemm.md); on AVX2 and below
// OpenBLAS keeps them (not measured against oneDNN there), and products too small to repay oneDNN's
// per-call cost stay on OpenBLAS (sgemm_lib_for). DLB_SGEMM=openblas|onednn|auto
// overrides; the choice and its reason are in `dlbench info` and every results file's context.
#pragma once
#include <string>

namespace dlb::cpu {

enum class SgemmLib { openblas, onednn };

struct Sgemm {
  bool trans_a = false, trans_b = false;
  long m = 0, n = 0, k = 0;
  const float* a = nullptr;  // op(A) is m x k: stored m x k (lda >= k) or, transposed, k x m (lda >= m)
  long lda = 0;
  const float* b = nullptr;  // op(B) is k x n: stored k x n (ldb >= n) or, transposed, n x k (ldb >= k)
  long ldb = 0;
  float beta = 0.0f;  // 0: C is overwritten (may hold garbage); 1: accumulated into
  float* c = nullptr;
  long ldc = 0;
  // n floats added to every row of C (a dense layer's bias; beta 0 only): oneDNN adds it in the
  // matmul's epilogue, OpenBLAS accumulates onto C filled with it (beta 1) -- either way no second
  // pass over C (a Transformer FF's linear1 at batch 64 x 32: 16 MB read and written, ~1 ms).
  const float* bias = nullptr;
};

void sgemm(const Sgemm& g);                 // with sgemm_lib_for(m, n, k)
void sgemm_with(SgemmLib lib, const Sgemm& g);  // with this one (tests run every library the build has)

// A dense layer's three products (every operand dense, row-major), the library above:
void sgemm_nt(long m, long n, long k, const float* a, const float* b, float* c,       // C = A B^T
              const float* bias = nullptr);                                            //   (+ bias)
void sgemm_nn(long m, long n, long k, const float* a, const float* b, float* c);      // C = A B
void sgemm_tn_add(long m, long n, long k, const float* a, const float* b, float* c);  // C += A^T B

SgemmLib sgemm_lib();              // DLB_SGEMM, else the auto rule; throws UsageError on a bad value
// The library for one product: sgemm_lib(), except that auto leaves products under
// kSgemmSmallWork multiply-adds to OpenBLAS (oneDNN's call costs 2-4 us, OpenBLAS's ~0.1 us).
SgemmLib sgemm_lib_for(long m, long n, long k);
constexpr long kSgemmSmallWork = 1L << 19;
std::string sgemm_lib_reason();    // why: "auto: oneDNN 2.6.3 at avx512_core_bf16", "DLB_SGEMM=openblas", ...
const char* sgemm_lib_name(SgemmLib lib);
bool sgemm_lib_available(SgemmLib lib);  // openblas always; onednn when built in

}  // namespace dlb::cpu
