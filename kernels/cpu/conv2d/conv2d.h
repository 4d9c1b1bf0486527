// Conv2d on the CPU: the shape every backend shares, the direct reference (fp64 accumulation) and
// the fast path (im2col + OpenBLAS sgemm). Layouts are PyTorch's: activations NCHW, filters KCRS
// (out channels, in channels, rows, cols). A ConvTranspose2d is the backward-data of the conv whose
// c/k are its out/in channels, so models reuse these for transposed convolutions.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/isa.h"

namespace dlb {

struct Conv2dShape {
  int n = 1, c = 1, h = 1, w = 1;  // input: batch, channels, height, width
  int k = 1, r = 1, s = 1;         // output channels, filter rows, filter cols
  int pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1;
  int p() const { return (h + 2 * pad_h - r) / stride_h + 1; }  // output height
  int q() const { return (w + 2 * pad_w - s) / stride_w + 1; }  // output width
  bool valid() const;                                           // positive dims, output >= 1x1
  // One forward pass: n*k*p*q outputs, each c*r*s FMAs = 2 flops. Backward-data and -filter do the same.
  double flops() const { return 2.0 * n * k * p() * q() * c * r * s; }
  std::size_t x_size() const { return std::size_t(n) * c * h * w; }
  std::size_t w_size() const { return std::size_t(k) * c * r * s; }
  std::size_t y_size() const { return std::size_t(n) * k * p() * q(); }
  std::string str() const;  // "n64_c3_h32_w32_k128_r5_s5_p0_u1"
  // The same padding and stride in both directions, as every layer of ours has.
  static Conv2dShape make(int n, int c, int h, int w, int k, int r, int s, int pad = 0, int stride = 1) {
    Conv2dShape sh;
    sh.n = n, sh.c = c, sh.h = h, sh.w = w, sh.k = k, sh.r = r, sh.s = s;
    sh.pad_h = sh.pad_w = pad;
    sh.stride_h = sh.stride_w = stride;
    return sh;
  }
};

namespace cpu {

// ---- the algorithms, and which one runs (algos.cpp: one table, in order of preference) ----
// Every entry point below picks the first row of its direction that applies to the shape at the
// DLB_CPU_ISA level in force (isa_active()), or runs the one it is given (tests, ablations; a row
// that does not apply throws std::invalid_argument). Names are the records' `cpu_algo`.
enum class ConvDir {
  forward,                          // conv2d_forward_im2col
  backward_data,                    // conv2d_backward_data_im2col
  backward_filter,                  // conv2d_backward_filter_im2col
  relu_pool_forward,                // conv2d_forward_relu_pool
  relu_pool_backward_filter,        // conv2d_backward_filter_relu_pool
  relu_pool_forward_bf16,           // conv2d_forward_relu_pool_bf16
  relu_pool_backward_filter_bf16,   // conv2d_backward_filter_relu_pool_bf16
  sparse_dy,                        // conv2d_backward_sparse_dy
  sparse_dy_bf16,                   // conv2d_backward_sparse_dy_bf16
};
enum class Algo {
  auto_,  // as an argument: choose(); as a result: no row applies
  fwd_col_avx512, fwd_col_avx2,            // im2col + our GEMM, pixels in the lanes (col_gemm.cpp)
  fwd_direct_avx512, fwd_direct_avx2,      // direct, CRSK filters (direct.cpp)
  fwd_im2col,                              // im2col + OpenBLAS sgemm (im2col.cpp)
  bwd_data_cols_avx512, bwd_data_cols_avx2,              // rotated conv over dy's columns (bwd_data_cols.cpp)
  bwd_data_rot_direct_avx512, bwd_data_rot_direct_avx2,  // rotated conv, the direct forward kernel
  bwd_data_rot_col_avx512, bwd_data_rot_col_avx2,        // rotated conv, the col forward GEMM
  bwd_data_rot_im2col,                                   // rotated conv, im2col + sgemm
  bwd_data_im2col,                                       // sgemm + col2im
  bwd_filter_direct_avx512, bwd_filter_direct_avx2,      // direct (direct.cpp)
  bwd_filter_col_avx512, bwd_filter_col_avx2,            // pixels-in-lanes GEMM (col_gemm.cpp)
  bwd_filter_im2col,                                     // im2col + sgemm
  relu_pool_fwd_col_avx512, relu_pool_fwd_col_avx2,      // relu_pool.cpp
  relu_pool_bwd_winners_avx512, relu_pool_bwd_winners_avx2,     // over the pool's winners only
  relu_pool_bwd_dense_col_avx512, relu_pool_bwd_dense_col_avx2,  // the dense gradient, col GEMM
  relu_pool_fwd_bf16, relu_pool_bwd_winners_bf16,
  sparse_dy_avx512, sparse_dy_bf16,                      // sparse_dy.cpp
  count_
};
const char* algo_name(Algo a);  // "fwd_col_avx512", ...; "auto" for Algo::auto_
ConvDir algo_dir(Algo a);
// Whether `a` takes `sh` at ISA level `isa` (pool_k: the fused directions' pool window).
bool algo_applies(Algo a, const Conv2dShape& sh, Isa isa, int pool_k = 0);
// The row the entry point of `dir` runs at `isa` (the first that applies), Algo::auto_ if none.
Algo choose(const Conv2dShape& sh, ConvDir dir, Isa isa, int pool_k = 0);


// Reference: direct loops, fp64 accumulation. Outputs are overwritten.
void conv2d_forward_direct(const Conv2dShape& sh, const float* x, const float* w, const float* bias, double* y);
void conv2d_backward_data_direct(const Conv2dShape& sh, const float* dy, const float* w, double* dx);
void conv2d_backward_filter_direct(const Conv2dShape& sh, const float* x, const float* dy, double* dw, double* db);
// The same over fp64 inputs (the models' grad checks); dw and db added to when `accumulate`.
void conv2d_forward_direct(const Conv2dShape& sh, const double* x, const double* w, const double* bias, double* y);
void conv2d_backward_data_direct(const Conv2dShape& sh, const double* dy, const double* w, double* dx);
void conv2d_backward_filter_direct(const Conv2dShape& sh, const double* x, const double* dy, double* dw, double* db,
                                   bool accumulate);

// One element of each reference (fp64, no bias), for sampled checks of shapes too big for the full
// loops: idx indexes y (forward), dx (backward-data) or dw (backward-filter).
double conv2d_forward_direct_at(const Conv2dShape& sh, const float* x, const float* w, std::size_t idx);
double conv2d_backward_data_direct_at(const Conv2dShape& sh, const float* dy, const float* w, std::size_t idx);
double conv2d_backward_filter_direct_at(const Conv2dShape& sh, const float* x, const float* dy, std::size_t idx);

// Fast: the algorithm the table picks (algos.cpp; im2col + sgemm where no other takes the shape).
// The batch is cut into tasks for the kernel threads (kernels/cpu/threads.h), each with
// single-threaded GEMMs; backward-filter adds the tasks' partial dW in a fixed order.
// `ws` (the calling thread's workspace) is resized as needed and can be reused across calls.
// bias / db may be null. Outputs are overwritten (dw, db too: not accumulated).
void conv2d_forward_im2col(const Conv2dShape& sh, const float* x, const float* w, const float* bias, float* y,
                           std::vector<float>& ws, Algo algo = Algo::auto_);
void conv2d_backward_data_im2col(const Conv2dShape& sh, const float* dy, const float* w, float* dx,
                                 std::vector<float>& ws, Algo algo = Algo::auto_);
void conv2d_backward_filter_im2col(const Conv2dShape& sh, const float* x, const float* dy, float* dw, float* db,
                                   std::vector<float>& ws, Algo algo = Algo::auto_);

// A convolution followed by ReLU and MaxPool2d(k) (window k, stride k), fused per image: the
// convolution's output is pooled while it is still in cache, and never written as a whole tensor
// (at the lecture's conv1, batch 64: 25.7 MB written and read back per direction otherwise).
//   forward:          y = relu(maxpool_k(conv(x) + bias)), pooled [n][K][P/k][Q/k], and arg as
//                     maxpool2d_relu_forward writes it (flat NCHW index into the convolution's output)
//   backward-filter:  dw, db of the convolution, from the pooled gradient dy, y and arg: over the
//                     pool's winners alone for the common first-layer filters (C x R of 3 or 1 x 3
//                     or 5, S <= 8; equal to the dense gradient's GEMM within rounding), else
//                     maxpool2d_relu_backward's dense dy made one image at a time, in cache.
// No input gradient: for a first layer. Forward is the same arithmetic as conv2d_forward_im2col
// followed by maxpool2d_relu_forward where that takes its own-GEMM path, and the dense backward that
// of maxpool2d_relu_backward followed by conv2d_backward_filter_im2col (fusable says where the fused
// kernels run; elsewhere they throw std::invalid_argument).
bool conv2d_relu_pool_fusable(const Conv2dShape& sh, int k);
void conv2d_forward_relu_pool(const Conv2dShape& sh, const float* x, const float* w, const float* bias, int k,
                              float* y, std::int32_t* arg, Algo algo = Algo::auto_);
void conv2d_backward_filter_relu_pool(const Conv2dShape& sh, const float* x, int k, const float* dy, const float* y,
                                      const std::int32_t* arg, float* dw, float* db, Algo algo = Algo::auto_);
// The same backward-filter under bf16 autocast, over the pool's winners with bf16 products and fp32
// sums (vdpbf16ps, two winners an instruction): x and dy are read as bf16 (rounded to nearest even;
// autocast's are bf16 already), db sums dy as given. For the shapes whose fp32 backward runs over the
// winners in AVX-512 (C x R of 3 or 1 x 3 or 5, square filters), where DLB_CPU_ISA allows
// avx512_bf16; elsewhere returns false having written nothing.
bool conv2d_backward_filter_relu_pool_bf16(const Conv2dShape& sh, const float* x, int k, const float* dy,
                                           const float* y, const std::int32_t* arg, float* dw, float* db,
                                           Algo algo = Algo::auto_);
// And its forward: y = relu(maxpool_k(bf16(conv(x, w) + bias))), arg as conv2d_forward_relu_pool's,
// with x and w rounded to bf16 (nearest even), bf16 products summed in fp32 (vdpbf16ps, two taps an
// instruction), bias added in fp32 and each output rounded to bf16 before the pool, as autocast's conv
// returns it. For the shapes both bf16 kernels take (conv2d_relu_pool_bf16_fusable: those of the
// backward above, stride 1, no padding, K % 4 == 0); elsewhere false, nothing written. y16, when
// given (K % 16 == 0): y once more, as bf16 in nChw16c (a next bf16 conv's input, no reorder).
bool conv2d_relu_pool_bf16_fusable(const Conv2dShape& sh, int k);
bool conv2d_forward_relu_pool_bf16(const Conv2dShape& sh, const float* x, const float* w, const float* bias, int k,
                                   float* y, std::int32_t* arg, std::uint16_t* y16 = nullptr, Algo algo = Algo::auto_);

// Both gradients of a convolution from a dy that is mostly zeros (behind ReLU + MaxPool2d, at most
// one output in four is nonzero), over the nonzeros alone: dw, db (may be null) and dx (may be null)
// overwritten, equal to the im2col GEMMs within rounding. Runs for stride 1, no padding, C a
// multiple of 16, DLB_CPU_ISA allowing avx512 and at most 30% of dy nonzero; elsewhere returns false
// having written nothing (the caller takes the dense route).
bool conv2d_backward_sparse_dy(const Conv2dShape& sh, const float* x, const float* w, const float* dy, float* dw,
                               float* db, float* dx, Algo algo = Algo::auto_);
// The same under bf16 autocast: bf16 products (x, w and dy rounded to bf16, nearest even; autocast's
// are bf16 already), fp32 sums, two nonzeros a vdpbf16ps; dx rounded to bf16 (as autocast's conv
// returns it), dw and db in fp32 (db sums dy as given). Where DLB_CPU_ISA
// allows avx512_bf16 as well; else false, nothing written.
bool conv2d_backward_sparse_dy_bf16(const Conv2dShape& sh, const float* x, const float* w, const float* dy, float* dw,
                                    float* db, float* dx, Algo algo = Algo::auto_);
// Whether the shape and the ISA cap let these run (bf16: the second one), before dy's density is known.
bool conv2d_backward_sparse_dy_shape(const Conv2dShape& sh, bool bf16);

}  // namespace cpu
}  // namespace dlb
