// Pixels-in-lanes GEMMs on one image's im2col matrix (wide K over a shallow C*R*S): forward and
// backward-filter, one body over the vector width (col_gemm.inc), compiled for AVX2 and AVX-512.
#include "kernels/cpu/conv2d/internal.h"
#include "kernels/cpu/simd.h"

#include <algorithm>

namespace dlb::cpu {
using namespace detail;

#ifdef DLB_DIRECT_KERNELS
// The bodies, once per ISA (kernels/cpu/foreach_isa.h; the scalar pass is never called).
#define DLB_ISA_NAMESPACE detail  // inside dlb::cpu here
#define DLB_ISA_INCLUDE "kernels/cpu/conv2d/col_gemm.inc"
#include "kernels/cpu/foreach_isa.h"
namespace detail {

// The stride-1 im2col of the AVX-512 kernels (relu_pool.cpp's too).
DLB_AVX512_T void im2col_s1_avx512(const Conv2dShape& sh, const float* x, float* col) { avx512::im2col_s1(sh, x, col); }

// The own-GEMM forward and backward-filter, in AVX-512 (w512) or AVX2: the one place that picks.
void forward_col(const Conv2dShape& sh, const float* x, const float* w, const float* bias, float* y, float* col,
                 bool w512) {
  if (w512) return avx512::forward_col(sh, x, w, bias, y, col);
  avx2::forward_col(sh, x, w, bias, y, col);
}
void backward_filter_col(const Conv2dShape& sh, const float* x, const DyImage& dy_of, float* dw, float* db,
                         std::vector<float>& ws, bool w512) {
  if (w512) return avx512::backward_filter_col(sh, x, dy_of, dw, db, ws);
  avx2::backward_filter_col(sh, x, dy_of, dw, db, ws);
}
}  // namespace detail
#endif

}  // namespace dlb::cpu
