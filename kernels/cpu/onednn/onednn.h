// oneDNN (the CPU counterpart of cuDNN, what PyTorch runs on the CPU) as a backend beside
// OpenBLAS: matrix products and convolutions in fp32 and bf16 (bf16 inputs, fp32 accumulation and
// output). Optional at build time like CUDA: without libdnnl every call throws dlb::Unsupported
// with unavailable_reason(). oneDNN's ISA is capped by ours (DLB_CPU_ISA, kernels/cpu/isa.h) before
// its first primitive; it has no scalar code, so DLB_CPU_ISA=scalar gives it SSE4.1.
// Layouts are the callers' plain ones (row-major matrices; NCHW activations, KCRS filters): every
// call here includes whatever reorders oneDNN needs, as a layer holding NCHW tensors would pay.
// Like our kernels, a call splits the batch (conv) or the rows of C (gemm) over the kernel threads
// (kernels/cpu/threads.h), oneDNN single-threaded in each; backward-filter adds the partial dW in
// task order. Primitives are built once per (part) shape and kept per thread.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/cpu/conv2d/conv2d.h"

namespace dlb::cpu::onednn {

bool available();                // built with oneDNN
std::string unavailable_reason();  // "" when available
std::string version();           // "2.6.3"; "" without oneDNN
std::string isa();               // the ISA oneDNN dispatches to now (after our cap), e.g. "avx512_core_bf16"
// Native bf16 dot products (avx512_bf16 and the cap allows it); false: oneDNN converts to fp32.
bool bf16_native();

// Input type. f32 and bf16: the caller's arrays hold that type, outputs are fp32. f32_as_bf16 (the
// CPU AMP step's layers): the caller passes fp32 arrays, oneDNN converts them to bf16 (round to
// nearest even) on the way into its own layouts, in the same pass as its reorder, and computes in
// bf16 with fp32 accumulation; a convolution's forward output and backward-data output are rounded
// to bf16 (as under autocast) and handed back widened to fp32, again in one reorder pass.
enum class Dt { f32, bf16, f32_as_bf16 };

// C[m x n] = op(A) op(B) + beta C (+ bias[j] on every row: the matmul's own bias, added in its
// epilogue), row-major with leading dimensions (0: dense). a/b are float* (Dt::f32,
// Dt::f32_as_bf16) or bf16 bit patterns (Dt::bf16); C and the bias are fp32.
struct Gemm {
  Dt dt = Dt::f32;
  bool trans_a = false, trans_b = false;
  long m = 0, n = 0, k = 0;
  const void* a = nullptr;
  const void* b = nullptr;
  float* c = nullptr;
  long lda = 0, ldb = 0, ldc = 0;
  float beta = 0.0f;
  const float* bias = nullptr;  // n floats, or null
};
void gemm(const Gemm& g);

// Convolution, PyTorch semantics (conv2d.h). Inputs of type dt (float* or bf16 bits), outputs fp32
// and overwritten (bf16-rounded under Dt::f32_as_bf16, except dW and db); bias / db may be null.
void conv2d_forward(const Conv2dShape& sh, Dt dt, const void* x, const void* w, const float* bias, float* y);
void conv2d_backward_data(const Conv2dShape& sh, Dt dt, const void* dy, const void* w, float* dx);
// The Dt::f32_as_bf16 forward with its output left as oneDNN writes it: bf16 bits in the blocked
// layout nChw16c ([n][k/16][p][q][16], bias added, rounded once), so a consumer that reads that
// layout (the AMP step's ReLU + max pool) saves the output reorder. False, writing nothing, when
// oneDNN's kernel for this shape writes another layout (or without oneDNN): use conv2d_forward then.
bool conv2d_forward_bf16_nchw16c(const Conv2dShape& sh, const float* x, const float* w, const float* bias,
                                 std::uint16_t* y16);
bool conv2d_forward_writes_nchw16c(const Conv2dShape& sh, bool bias);  // the check alone
// The same with x given as bf16 in nChw16c as well (as our fused first layer can write it: no input
// reorder); false, writing nothing, where oneDNN reads another src layout (the check alone: _reads_).
bool conv2d_forward_bf16_nchw16c_src(const Conv2dShape& sh, const std::uint16_t* x16, const float* w, const float* bias,
                                     std::uint16_t* y16);
bool conv2d_forward_reads_nchw16c_src(const Conv2dShape& sh, bool bias);
// Its backward: dW (+ db) and, when dx is not null, dx (fp32, bf16-rounded), with dy given as bf16 in
// nChw16c (no dy reorder); x and w fp32 as for Dt::f32_as_bf16. False, computing nothing, where
// oneDNN's kernels read dy in another layout.
bool conv2d_backward_bf16_nchw16c_dy(const Conv2dShape& sh, const float* x, const float* w, const std::uint16_t* dy16,
                                     float* dw, float* db, float* dx);
bool conv2d_backward_reads_nchw16c_dy(const Conv2dShape& sh, bool db, bool dx);  // the check alone
void conv2d_backward_filter(const Conv2dShape& sh, Dt dt, const void* x, const void* dy, float* dw, float* db);

// The implementation oneDNN picked for the last call of each kind on this thread ("jit:avx512_core", ...).
std::string last_impl();

}  // namespace dlb::cpu::onednn
