// bf16 matrix products on the CPU: bf16 storage (raw 16-bit patterns), fp32 accumulation, fp32
// output, as PyTorch's CPU autocast runs linear/conv/matmul in bf16. Row-major:
// C[m x n] = op(A) op(B) + beta C, op(A) m x k, op(B) k x n (op = optional transpose).
//   bf16_gemm_forward_ref          fp64 triple loop on the widened values (the reference)
//   bf16_gemm_forward_sbgemm       OpenBLAS cblas_sbgemm (native bf16 dot products on avx512_bf16 CPUs)
//   bf16_gemm_forward_widen_sgemm  widen A and B to fp32 scratch (exact), then OpenBLAS sgemm: the
//                                  same numbers as a bf16 GEMM with fp32 accumulation, at fp32 speed
//                                  plus the widening (6 bytes/element moved, O(mk + kn) vs O(mnk)).
//   bf16_gemm_forward_onednn       oneDNN matmul (kernels/cpu/onednn/): vdpbf16ps on avx512_bf16 CPUs
//   bf16_gemm                      the launcher: where the CPU has avx512_bf16 and DLB_CPU_ISA allows
//                                  it, oneDNN (or else sbgemm where OpenBLAS has it); else
//                                  widen+sgemm. bf16_gemm_path() says which one runs here.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dlb::cpu {

struct Bf16GemmArgs {
  bool trans_a = false, trans_b = false;
  long m = 0, n = 0, k = 0;
  const std::uint16_t* a = nullptr;  // bf16, lda = trans_a ? m : k unless given
  const std::uint16_t* b = nullptr;  // bf16, ldb = trans_b ? k : n unless given
  float* c = nullptr;                // fp32, ldc = n unless given
  long lda = 0, ldb = 0, ldc = 0;
  float beta = 0.0f;                 // C = op(A) op(B) + beta C
};

void bf16_gemm_forward_ref(const Bf16GemmArgs& g);
void bf16_gemm_forward_sbgemm(const Bf16GemmArgs& g);  // throws dlb::Unsupported without cblas_sbgemm
void bf16_gemm_forward_widen_sgemm(const Bf16GemmArgs& g);
void bf16_gemm_forward_onednn(const Bf16GemmArgs& g);  // throws dlb::Unsupported without oneDNN
void bf16_gemm(const Bf16GemmArgs& g);

// Three bf16 operands of a product, kept between calls (grown, never shrunk).
using Bf16Scratch = std::vector<std::uint16_t>[3];

// A dense layer's products on bf16 operands (the fp32 ones: sgemm.h's sgemm_nt, sgemm_tn_add,
// sgemm_nn), x [m x k], W [n x k], y and dy [m x n], fp32 arrays cast into the scratch (exact for
// bf16-valued ones; x into s[0], W into s[1], dy into s[2]): y = x W^T; dW += dy^T x and dx = dy W
// (dx may be null). The bias is the caller's. cast_by_forward: s[0] and s[1] still hold x and W as
// this product's dense_bf16_forward cast them, unchanged since (a step's own scratch from its forward
// to its backward): only dy is cast, the same numbers for two fewer casts (at gpt2-124m the weights'
// 124 M values a step, ~0.75 GB moved).
void dense_bf16_forward(long m, long n, long k, const float* x, const float* w, float* y,
                        Bf16Scratch& s);
void dense_bf16_backward(long m, long n, long k, const float* x, const float* w, const float* dy, float* dw, float* dx,
                         Bf16Scratch& s, bool cast_by_forward = false);

// "onednn (avx512_bf16)", "openblas-sbgemm" or "widen+sgemm (reason)": the path bf16_gemm takes now.
std::string bf16_gemm_path();
bool bf16_gemm_native();  // true when a native bf16 path (oneDNN or sbgemm) runs

}  // namespace dlb::cpu
