// The launchers: the batch cut into tasks for the kernel threads, per-thread filter copies, and the
// public entry points of the three directions.
#include "kernels/cpu/conv2d/internal.h"

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace dlb::cpu {
using namespace detail;

namespace detail {

// ---- launchers: the batch cut into tasks for the kernel threads (kernels/cpu/threads.h) ----

// Below this many flops a conv runs on the calling thread: a region costs a few microseconds.
constexpr double kMinParallelFlops = 2e6;

// Images per task: the cache-sized chunk of `run` (the convolution that actually runs), but no
// more than an equal share of the batch, so every thread gets work at small batches.
int task_images(const Conv2dShape& sh, const Conv2dShape& run) {
  const int share = (sh.n + kernel_threads() - 1) / kernel_threads();
  return std::max(1, std::min(chunk_images(run), share));
}

bool parallel_conv(const Conv2dShape& sh) {
  return kernel_threads() > 1 && sh.n > 1 && sh.flops() >= kMinParallelFlops;
}

// Images [first, first + s.n) of `sh` as a shape.
Conv2dShape sub_batch(const Conv2dShape& sh, long first, long last) {
  Conv2dShape s = sh;
  s.n = int(last - first);
  return s;
}

// Workspace of the calling thread's tasks (each thread has its own).
std::vector<float>& thread_ws() {
  thread_local std::vector<float> ws;
  return ws;
}

}  // namespace detail

// Filters laid out anew on every call (CRSK for the direct forward, rotated for the backward-data),
// by each thread that runs tasks of the call, into a buffer of its own (site: one per launcher).
// Written once by the caller and read by the other thread, the 205 KB of conv2's filters crossed
// cores on every call: at batch 2 that cost as much as the conv itself in the phases when this
// shared host put the two cores far apart (our two threads then ran at one thread's speed, while
// oneDNN, which lays its filters out per thread, did not slow down).
struct FilterCopy {
  std::vector<float> buf;
  std::uint64_t call = 0;
  float* p = nullptr;
};
std::atomic<std::uint64_t> g_filter_calls{0};
template <class Fill>
const float* filters_for_call(FilterCopy& fc, std::uint64_t call, std::size_t n, Fill&& fill) {
  if (fc.call != call) {
    fc.p = ensure_aligned(fc.buf, n);
    fill(fc.p);
    fc.call = call;
  }
  return fc.p;
}

void conv2d_forward_im2col(const Conv2dShape& sh, const float* x, const float* w, const float* bias, float* y,
                           std::vector<float>& ws) {
  check_shape(sh);
  bool crsk = false;  // the direct kernel, on filters in CRSK order (filters_for_call)
#ifdef DLB_DIRECT_KERNELS
  crsk = !use_col_forward(sh) && use_direct_forward(sh);
#endif
  const std::uint64_t call = ++g_filter_calls;
  auto filters = [&]() -> const float* {
    thread_local FilterCopy fc;
    return crsk ? filters_for_call(fc, call, sh.w_size(), [&](float* f) { filters_to_crsk(sh, w, f); }) : nullptr;
  };
  if (!parallel_conv(sh)) return forward_serial(sh, x, w, bias, y, ws, filters());
  const std::size_t xi = std::size_t(sh.c) * sh.h * sh.w, yi = std::size_t(sh.k) * sh.p() * sh.q();
  const int per = crsk ? 1 : task_images(sh, sh), tasks = (sh.n + per - 1) / per;
  parallel_tasks(tasks, [&](int t) {
    const long i0 = long(t) * per, i1 = std::min<long>(sh.n, i0 + per);
    forward_serial(sub_batch(sh, i0, i1), x + i0 * xi, w, bias, y + i0 * yi, thread_ws(), filters());
  });
}

void conv2d_backward_data_im2col(const Conv2dShape& sh, const float* dy, const float* w, float* dx,
                                 std::vector<float>& ws) {
  check_shape(sh);
  const bool rot = backward_data_as_forward(sh);
  bool crsk = false;
#ifdef DLB_DIRECT_KERNELS
  crsk = rot && use_direct_forward(rotated_shape(sh), true);
#endif
  const std::uint64_t call = ++g_filter_calls;
  auto filters = [&]() -> const float* {  // the rotated filters (filters_for_call), null when !rot
    thread_local FilterCopy fc;
    if (!rot) return nullptr;
    return filters_for_call(fc, call, sh.w_size(), [&](float* f) {
      if (crsk && use_cols_backward_data(sh)) rotate_filters_cols(sh, w, f);
      else if (crsk) rotate_filters_crsk(sh, w, f);
      else rotate_filters(sh, w, f);
    });
  };
  if (!parallel_conv(sh)) return backward_data_serial(sh, dy, w, dx, ws, filters(), crsk);
  const std::size_t xi = std::size_t(sh.c) * sh.h * sh.w, yi = std::size_t(sh.k) * sh.p() * sh.q();
  const int per = crsk ? 1 : task_images(sh, rot ? rotated_shape(sh) : sh), tasks = (sh.n + per - 1) / per;
  parallel_tasks(tasks, [&](int t) {
    const long i0 = long(t) * per, i1 = std::min<long>(sh.n, i0 + per);
    backward_data_serial(sub_batch(sh, i0, i1), dy + i0 * yi, w, dx + i0 * xi, thread_ws(), filters(), crsk);
  });
}


void conv2d_backward_filter_im2col(const Conv2dShape& sh, const float* x, const float* dy, float* dw, float* db,
                                   std::vector<float>& ws) {
  check_shape(sh);
  const std::size_t xi = std::size_t(sh.c) * sh.h * sh.w, yi = std::size_t(sh.k) * sh.p() * sh.q();
  backward_filter_tasks(sh, dw, db, ws,
                        [&](const Conv2dShape& s, long i0, float* pdw, float* pdb, std::vector<float>& w) {
                          backward_filter_serial(s, x + i0 * xi, dy + i0 * yi, pdw, pdb, w);
                        });
}

}  // namespace dlb::cpu
