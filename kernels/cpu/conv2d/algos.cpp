// Which kernel runs: THE dispatch table of the CPU convolutions. One row per algorithm: its name
// (the records' `cpu_algo`), its direction, the shapes and ISA levels it takes, and how to run it.
// An entry point runs the first row of its direction that applies (rows are in order of
// preference), so a new kernel is one row here, and tests/kernels/cpu/conv2d/test_conv2d_algos.cpp tests it.
#include "kernels/cpu/conv2d/internal.h"

#include <stdexcept>
#include <string>

namespace dlb::cpu {
using namespace detail;

namespace detail {
namespace {

bool at(Isa isa, Isa need) { return static_cast<int>(isa) >= static_cast<int>(need); }
bool unit_stride(const Conv2dShape& sh) { return sh.stride_h == 1 && sh.stride_w == 1; }
bool unpadded(const Conv2dShape& sh) { return sh.pad_h == 0 && sh.pad_w == 0; }
int crs(const Conv2dShape& sh) { return sh.c * sh.r * sh.s; }

constexpr int kDirectMaxK = 32;  // above this, a GEMM per image is deep enough

// ---- the shapes each kernel family takes ----

// The direct kernels (direct.cpp) for few output channels (the lecture's conv2, 128 -> 16 channels
// 5x5): stride 1, no padding, K a multiple of 8 up to kDirectMaxK, C*R*S >= 64, AVX2 + FMA.
bool direct_fits(const Conv2dShape& sh, Isa isa) {
  return unit_stride(sh) && unpadded(sh) && sh.k % 8 == 0 && sh.k <= kDirectMaxK && crs(sh) >= 64 &&
         !is_pointwise(sh) && at(isa, Isa::avx2);
}

// The direct forward kernel also takes padding, and with AVX-512 (DLB_CPU_ISA permitting) K above
// kDirectMaxK when K is a multiple of 16: 32 channels x 12 pixels per block (the lecture's conv1,
// K = 128, C = 3: the im2col GEMM is only 75 deep there). any_k: every K (the backward-data of a
// conv with few output channels, run as a forward conv with rotated filters and "full" padding).
// (Measurements: docs/notes/2026-11-25-conv-cpu.md.)
bool direct_forward_fits(const Conv2dShape& sh, Isa isa, bool any_k) {
  const bool wide_k = sh.k % 16 == 0 && at(isa, Isa::avx512);
  return unit_stride(sh) && sh.k % 8 == 0 && (any_k || sh.k <= kDirectMaxK || wide_k) && crs(sh) >= 64 &&
         !is_pointwise(sh) && at(isa, Isa::avx2);
}

// Forward for wide K over a shallow C*R*S (the lecture's conv1), any stride and padding: im2col and
// our own GEMM with the pixels in the vector lanes (col_gemm.cpp). Ahead of the direct kernel there,
// whose k-major blocks cost a scalar scatter of every output into NCHW.
bool col_forward_fits(const Conv2dShape& sh, Isa isa) {
  return sh.k % 4 == 0 && sh.k > kDirectMaxK && crs(sh) <= 256 && !is_pointwise(sh) && at(isa, Isa::avx2);
}

// Backward-filter for wide K and a shallow C*R*S (the lecture's conv1: K = 128, C*R*S = 75), where
// the direct kernel streams a transposed dy once per 16 channels and tap pair, and im2col's sgemm is
// only C*R*S wide: our own GEMM with the pixels in the vector lanes instead. AVX-512: K % 4 == 0;
// AVX2: K % 2 == 0.
bool col_backward_filter_fits(const Conv2dShape& sh, Isa isa, bool w512) {
  return unit_stride(sh) && unpadded(sh) && sh.k % (w512 ? 4 : 2) == 0 && sh.k > kDirectMaxK && crs(sh) <= 256 &&
         !is_pointwise(sh) && at(isa, w512 ? Isa::avx512 : Isa::avx2);
}

// Backward-data as a forward convolution (stride 1 only): dx = conv(dy padded by r-1-pad, W
// rotated by 180 degrees with c and k swapped). Its GEMM is C x (K*R*S) x (H*W) per image instead
// of (C*R*S) x K x (P*Q): far better shaped when K is small (conv2: K = 16 makes the plain path a
// 16-deep GEMM that only writes a 3200-row dcol), at the price of multiplying the zero border
// (H*W / P*Q times the flops, <= 2.5x where we take it; not by the cols kernels).
bool as_forward(const Conv2dShape& sh) {
  if (sh.stride_h != 1 || sh.stride_w != 1 || sh.pad_h > sh.r - 1 || sh.pad_w > sh.s - 1) return false;
  const double waste = double(sh.h) * sh.w / (double(sh.p()) * sh.q());
  return sh.k * 4 <= sh.c && waste <= 2.5;
}
// The rotated conv on the direct forward kernel's CRSK filters.
bool rot_direct_fits(const Conv2dShape& sh, Isa isa) {
  return as_forward(sh) && direct_forward_fits(rotated_shape(sh), isa, true);
}
// The cols kernels (bwd_data_cols.cpp) take those for S of 3 or 5: C a multiple of 16 (AVX-512) or 8.
bool cols_fits(const Conv2dShape& sh, Isa isa, bool w512) {
  return rot_direct_fits(sh, isa) && (sh.s == 3 || sh.s == 5) && sh.c % (w512 ? 16 : 8) == 0 &&
         at(isa, w512 ? Isa::avx512 : Isa::avx2);
}

// conv + ReLU + MaxPool2d(k) fused (relu_pool.cpp): where both col GEMMs take the shape (arg holds
// flat indices into the whole convolution output: int32).
bool fused_fits(const Conv2dShape& sh, Isa isa, int k) {
  return sh.valid() && k >= 1 && sh.p() >= k && sh.q() >= k && col_forward_fits(sh, isa) &&
         (col_backward_filter_fits(sh, isa, true) || col_backward_filter_fits(sh, isa, false)) &&
         double(sh.n) * sh.k * sh.p() * sh.q() < 2147483647.0;
}
// The winners kernels' instances: first layers (RGB or grey, 3x3 or 5x5); AVX-512 and bf16 square.
bool first_layer(const Conv2dShape& sh) { return (sh.c == 3 || sh.c == 1) && (sh.r == 5 || sh.r == 3); }
bool winners512_fits(const Conv2dShape& sh, Isa isa, int k) {
  return fused_fits(sh, isa, k) && first_layer(sh) && sh.r == sh.s && at(isa, Isa::avx512);
}
bool winners_avx2_fits(const Conv2dShape& sh, Isa isa, int k) {
  return fused_fits(sh, isa, k) && first_layer(sh) && sh.s <= 8 && at(isa, Isa::avx2);
}
bool winners_bf16_fits(const Conv2dShape& sh, Isa isa, int k) {
  return fused_fits(sh, isa, k) && first_layer(sh) && sh.r == sh.s && at(isa, Isa::avx512_bf16);
}
bool fused_bf16_fits(const Conv2dShape& sh, Isa isa, int k) {
  return winners_bf16_fits(sh, isa, k) && unit_stride(sh) && unpadded(sh) && sh.k % 4 == 0;
}

// Sparse dy (sparse_dy.cpp): stride 1, no padding, C a multiple of 16, AVX-512 (+ bf16).
bool sparse_fits(const Conv2dShape& sh, Isa isa, bool bf16) {
  return sh.valid() && unit_stride(sh) && unpadded(sh) && sh.c % 16 == 0 &&
         at(isa, bf16 ? Isa::avx512_bf16 : Isa::avx512);
}

// ---- how each row runs: dense directions on one thread's sub-batch (threading.cpp cuts the batch
// and lays the filters out as the row's `filters` says), the fused and sparse ones whole ----

std::vector<float>& ws_of(const ConvCall& c) { return *c.ws; }
bool run_fwd_im2col(const ConvCall& c) { return forward_im2col_gemm(c.sh, c.x, c.w, c.bias, c.out, ws_of(c)), true; }
bool run_bwd_data_im2col(const ConvCall& c) {
  return backward_data_im2col_gemm(c.sh, c.dy, c.w, c.out, ws_of(c)), true;
}
bool run_bwd_data_rot_im2col(const ConvCall& c) {
  return forward_im2col_gemm(rotated_shape(c.sh), c.dy, c.wt, nullptr, c.out, ws_of(c)), true;
}
bool run_bwd_filter_im2col(const ConvCall& c) {
  return backward_filter_im2col_gemm(c.sh, c.x, c.dy, c.out, c.db, ws_of(c)), true;
}

#ifdef DLB_DIRECT_KERNELS
float* col_of(const Conv2dShape& sh, std::vector<float>& ws) {
  return ensure_aligned(ws, std::size_t(sh.c) * sh.r * sh.s * sh.p() * sh.q());
}
float* xpad_of(const Conv2dShape& sh, std::vector<float>& ws) {
  const bool padded = sh.pad_h > 0 || sh.pad_w > 0;
  return ensure_aligned(ws, padded ? std::size_t(sh.c) * (sh.h + 2 * sh.pad_h) * (sh.w + 2 * sh.pad_w) : 0);
}
template <bool W512>
bool run_fwd_col(const ConvCall& c) {
  forward_col(c.sh, c.x, c.w, c.bias, c.out, col_of(c.sh, ws_of(c)), W512);
  return true;
}
template <bool W512>
bool run_fwd_direct(const ConvCall& c) {
  forward_direct(c.sh, c.x, c.wt, c.bias, c.out, xpad_of(c.sh, ws_of(c)), W512);
  return true;
}
template <bool W512>
bool run_bwd_data_cols(const ConvCall& c) {
  backward_data_cols(c.sh, c.dy, c.wt, c.out, ws_of(c), W512);
  return true;
}
template <bool W512>
bool run_bwd_data_rot_direct(const ConvCall& c) {
  const Conv2dShape rot = rotated_shape(c.sh);
  forward_direct(rot, c.dy, c.wt, nullptr, c.out, xpad_of(rot, ws_of(c)), W512);
  return true;
}
template <bool W512>
bool run_bwd_data_rot_col(const ConvCall& c) {
  const Conv2dShape rot = rotated_shape(c.sh);
  forward_col(rot, c.dy, c.wt, nullptr, c.out, col_of(rot, ws_of(c)), W512);
  return true;
}
template <bool W512>
bool run_bwd_filter_direct(const ConvCall& c) {
  backward_filter_direct(c.sh, c.x, c.dy, c.out, c.db, ensure_aligned(ws_of(c), c.sh.y_size()), W512);
  return true;
}
template <bool W512>
bool run_bwd_filter_col(const ConvCall& c) {
  const std::size_t yi = std::size_t(c.sh.k) * c.sh.p() * c.sh.q();
  const float* dy = c.dy;
  const DyImage dy_of = [&](int n) { return dy + n * yi; };
  backward_filter_col(c.sh, c.x, dy_of, c.out, c.db, ws_of(c), W512);
  return true;
}
template <bool W512>
bool run_relu_pool_fwd(const ConvCall& c) {
  relu_pool_forward_col(c.sh, c.x, c.w, c.bias, c.pool_k, c.out, c.out_arg, W512);
  return true;
}
bool run_relu_pool_fwd_bf16(const ConvCall& c) {
  relu_pool_forward_bf16(c.sh, c.x, c.w, c.bias, c.pool_k, c.out, c.out_arg, c.y16);
  return true;
}
template <int WINNERS, bool COL512>  // WINNERS: 0 dense, 1 AVX2, 2 AVX-512, 3 bf16
bool run_relu_pool_bwd(const ConvCall& c) {
  const SparseFilterFn sparse = WINNERS == 1   ? pool_winners_avx2(c.sh)
                                : WINNERS == 2 ? pool_winners512(c.sh)
                                : WINNERS == 3 ? pool_winners_bf16(c.sh)
                                               : nullptr;
  relu_pool_backward_filter(c.sh, c.x, c.pool_k, c.dy, c.y, c.arg, c.out, c.db, sparse, COL512);
  return true;
}
template <bool BF>
bool run_sparse_dy(const ConvCall& c) {
  return sparse_dy_run(c.sh, c.x, c.w, c.dy, c.out, c.db, c.dx, BF);
}
#endif

bool always(const Conv2dShape&, Isa, int) { return true; }
#define DLB_ROW(algo, dir, applies, run, filters) {Algo::algo, #algo, ConvDir::dir, applies, run, Filters::filters}

const AlgoRow kAlgos[] = {
#ifdef DLB_DIRECT_KERNELS
    DLB_ROW(fwd_col_avx512, forward,
            [](const Conv2dShape& sh, Isa isa, int) { return col_forward_fits(sh, isa) && at(isa, Isa::avx512); },
            run_fwd_col<true>, kcrs),
    DLB_ROW(fwd_col_avx2, forward, [](const Conv2dShape& sh, Isa isa, int) { return col_forward_fits(sh, isa); },
            run_fwd_col<false>, kcrs),
    DLB_ROW(fwd_direct_avx512, forward,
            [](const Conv2dShape& sh, Isa isa, int) {
              return direct_forward_fits(sh, isa, false) && sh.k % 16 == 0 && at(isa, Isa::avx512);
            },
            run_fwd_direct<true>, crsk),
    DLB_ROW(fwd_direct_avx2, forward,
            [](const Conv2dShape& sh, Isa isa, int) { return direct_forward_fits(sh, isa, false); },
            run_fwd_direct<false>, crsk),
#endif
    DLB_ROW(fwd_im2col, forward, always, run_fwd_im2col, kcrs),
#ifdef DLB_DIRECT_KERNELS
    DLB_ROW(bwd_data_cols_avx512, backward_data,
            [](const Conv2dShape& sh, Isa isa, int) { return cols_fits(sh, isa, true); }, run_bwd_data_cols<true>,
            rot_cols16),
    DLB_ROW(bwd_data_cols_avx2, backward_data,
            [](const Conv2dShape& sh, Isa isa, int) { return cols_fits(sh, isa, false); }, run_bwd_data_cols<false>,
            rot_cols8),
    DLB_ROW(bwd_data_rot_direct_avx512, backward_data,
            [](const Conv2dShape& sh, Isa isa, int) {
              return rot_direct_fits(sh, isa) && sh.c % 16 == 0 && at(isa, Isa::avx512);
            },
            run_bwd_data_rot_direct<true>, rot_crsk),
    DLB_ROW(bwd_data_rot_direct_avx2, backward_data,
            [](const Conv2dShape& sh, Isa isa, int) { return rot_direct_fits(sh, isa); },
            run_bwd_data_rot_direct<false>, rot_crsk),
    DLB_ROW(bwd_data_rot_col_avx512, backward_data,
            [](const Conv2dShape& sh, Isa isa, int) {
              return as_forward(sh) && col_forward_fits(rotated_shape(sh), isa) && at(isa, Isa::avx512);
            },
            run_bwd_data_rot_col<true>, rot_kcrs),
    DLB_ROW(bwd_data_rot_col_avx2, backward_data,
            [](const Conv2dShape& sh, Isa isa, int) {
              return as_forward(sh) && col_forward_fits(rotated_shape(sh), isa);
            },
            run_bwd_data_rot_col<false>, rot_kcrs),
#endif
    DLB_ROW(bwd_data_rot_im2col, backward_data, [](const Conv2dShape& sh, Isa, int) { return as_forward(sh); },
            run_bwd_data_rot_im2col, rot_kcrs),
    DLB_ROW(bwd_data_im2col, backward_data, always, run_bwd_data_im2col, kcrs),
#ifdef DLB_DIRECT_KERNELS
    DLB_ROW(bwd_filter_direct_avx512, backward_filter,
            [](const Conv2dShape& sh, Isa isa, int) {
              return direct_fits(sh, isa) && sh.k % 16 == 0 && at(isa, Isa::avx512);
            },
            run_bwd_filter_direct<true>, kcrs),
    DLB_ROW(bwd_filter_direct_avx2, backward_filter,
            [](const Conv2dShape& sh, Isa isa, int) { return direct_fits(sh, isa); },
            run_bwd_filter_direct<false>, kcrs),
    DLB_ROW(bwd_filter_col_avx512, backward_filter,
            [](const Conv2dShape& sh, Isa isa, int) { return col_backward_filter_fits(sh, isa, true); },
            run_bwd_filter_col<true>, kcrs),
    DLB_ROW(bwd_filter_col_avx2, backward_filter,
            [](const Conv2dShape& sh, Isa isa, int) { return col_backward_filter_fits(sh, isa, false); },
            run_bwd_filter_col<false>, kcrs),
#endif
    DLB_ROW(bwd_filter_im2col, backward_filter, always, run_bwd_filter_im2col, kcrs),
#ifdef DLB_DIRECT_KERNELS
    DLB_ROW(relu_pool_fwd_col_avx512, relu_pool_forward,
            [](const Conv2dShape& sh, Isa isa, int k) { return fused_fits(sh, isa, k) && at(isa, Isa::avx512); },
            run_relu_pool_fwd<true>, kcrs),
    DLB_ROW(relu_pool_fwd_col_avx2, relu_pool_forward, fused_fits, run_relu_pool_fwd<false>, kcrs),
    // Over the pool's winners where an instance takes the shape, else the dense gradient image by image.
    DLB_ROW(relu_pool_bwd_winners_avx512, relu_pool_backward_filter, winners512_fits, (run_relu_pool_bwd<2, false>),
            kcrs),
    DLB_ROW(relu_pool_bwd_winners_avx2, relu_pool_backward_filter, winners_avx2_fits, (run_relu_pool_bwd<1, false>),
            kcrs),
    DLB_ROW(relu_pool_bwd_dense_col_avx512, relu_pool_backward_filter,
            [](const Conv2dShape& sh, Isa isa, int k) {
              return fused_fits(sh, isa, k) && col_backward_filter_fits(sh, isa, true);
            },
            (run_relu_pool_bwd<0, true>), kcrs),
    DLB_ROW(relu_pool_bwd_dense_col_avx2, relu_pool_backward_filter,
            [](const Conv2dShape& sh, Isa isa, int k) {
              return fused_fits(sh, isa, k) && col_backward_filter_fits(sh, isa, false);
            },
            (run_relu_pool_bwd<0, false>), kcrs),
    DLB_ROW(relu_pool_fwd_bf16, relu_pool_forward_bf16, fused_bf16_fits, run_relu_pool_fwd_bf16, kcrs),
    DLB_ROW(relu_pool_bwd_winners_bf16, relu_pool_backward_filter_bf16, winners_bf16_fits,
            (run_relu_pool_bwd<3, false>), kcrs),
    DLB_ROW(sparse_dy_avx512, sparse_dy,
            [](const Conv2dShape& sh, Isa isa, int) { return sparse_fits(sh, isa, false); },
            run_sparse_dy<false>, kcrs),
    DLB_ROW(sparse_dy_bf16, sparse_dy_bf16,
            [](const Conv2dShape& sh, Isa isa, int) { return sparse_fits(sh, isa, true); },
            run_sparse_dy<true>, kcrs),
#endif
};
#undef DLB_ROW

}  // namespace

const AlgoRow* algo_row(Algo a) {
  for (const AlgoRow& row : kAlgos)
    if (row.algo == a) return &row;
  return nullptr;  // not built here (no x86-64 kernels)
}

const AlgoRow* resolve(Algo requested, const Conv2dShape& sh, ConvDir dir, int pool_k) {
  const Isa isa = isa_active();
  if (requested == Algo::auto_) return algo_row(choose(sh, dir, isa, pool_k));
  const AlgoRow* row = algo_row(requested);
  if (!row || row->dir != dir || !row->applies(sh, isa, pool_k))
    throw std::invalid_argument(std::string("conv2d: algorithm ") + algo_name(requested) + " does not take " +
                                sh.str() + " at " + isa_name(isa));
  return row;
}
}  // namespace detail

const char* algo_name(Algo a) {
  if (a == Algo::auto_) return "auto";
  const AlgoRow* row = algo_row(a);
  return row ? row->name : "unavailable";
}

ConvDir algo_dir(Algo a) {
  const AlgoRow* row = algo_row(a);
  if (!row) throw std::invalid_argument("conv2d: no such algorithm here");
  return row->dir;
}

bool algo_applies(Algo a, const Conv2dShape& sh, Isa isa, int pool_k) {
  const AlgoRow* row = algo_row(a);
  return row && row->applies(sh, isa, pool_k);
}

Algo choose(const Conv2dShape& sh, ConvDir dir, Isa isa, int pool_k) {
  for (const AlgoRow& row : kAlgos)
    if (row.dir == dir && row.applies(sh, isa, pool_k)) return row.algo;
  return Algo::auto_;
}

}  // namespace dlb::cpu
