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
// Written once by the caller and read by the other thread, conv2's 205 KB of filters would cross
// cores on every call (why that hurts on a shared 2-core VM: docs/notes/2026-11-25-conv-cpu.md).
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

namespace {
// w laid out as `f` says into dst (w_size() floats); nothing for Filters::kcrs (the rows read w).
void lay_out_filters(Filters f, const Conv2dShape& sh, const float* w, float* dst) {
  switch (f) {
    case Filters::kcrs: return;
    case Filters::rot_kcrs: return rotate_filters(sh, w, dst);
#ifdef DLB_DIRECT_KERNELS
    case Filters::crsk: return filters_to_crsk(sh, w, dst);
    case Filters::rot_crsk: return rotate_filters_crsk(sh, w, dst);
    case Filters::rot_cols16: return rotate_filters_cols(sh, w, dst, true);
    case Filters::rot_cols8: return rotate_filters_cols(sh, w, dst, false);
#else
    default: return;
#endif
  }
}
// The filters in `row`'s layout for this call (the rotated ones for backward-data), laid out once per
// thread and call; null for KCRS (the row reads w). One copy per thread serves both directions.
const float* row_filters(const AlgoRow& row, std::uint64_t call, const Conv2dShape& sh, const float* w) {
  thread_local FilterCopy fc;
  if (row.filters == Filters::kcrs) return nullptr;
  return filters_for_call(fc, call, sh.w_size(), [&](float* f) { lay_out_filters(row.filters, sh, w, f); });
}
// The direct and cols kernels' filter layouts: a task per image (their work per image is large).
bool per_image_tasks(Filters f) {
  return f == Filters::crsk || f == Filters::rot_crsk || f == Filters::rot_cols16 || f == Filters::rot_cols8;
}
}  // namespace

void conv2d_forward_im2col(const Conv2dShape& sh, const float* x, const float* w, const float* bias, float* y,
                           std::vector<float>& ws, Algo algo) {
  check_shape(sh);
  const AlgoRow& row = *resolve(algo, sh, ConvDir::forward, 0);
  const std::uint64_t call = ++g_filter_calls;
  const std::size_t xi = std::size_t(sh.c) * sh.h * sh.w, yi = std::size_t(sh.k) * sh.p() * sh.q();
  auto run = [&](const Conv2dShape& s, long i0, std::vector<float>& tws) {
    ConvCall c;
    c.sh = s, c.x = x + i0 * xi, c.w = w, c.bias = bias, c.out = y + i0 * yi, c.wt = row_filters(row, call, sh, w), c.ws = &tws;
    row.run(c);
  };
  if (!parallel_conv(sh)) return run(sh, 0, ws);
  const int per = per_image_tasks(row.filters) ? 1 : task_images(sh, sh), tasks = (sh.n + per - 1) / per;
  parallel_tasks(tasks, [&](int t) {
    const long i0 = long(t) * per, i1 = std::min<long>(sh.n, i0 + per);
    run(sub_batch(sh, i0, i1), i0, thread_ws());
  });
}

void conv2d_backward_data_im2col(const Conv2dShape& sh, const float* dy, const float* w, float* dx,
                                 std::vector<float>& ws, Algo algo) {
  check_shape(sh);
  const AlgoRow& row = *resolve(algo, sh, ConvDir::backward_data, 0);
  const std::uint64_t call = ++g_filter_calls;
  const std::size_t xi = std::size_t(sh.c) * sh.h * sh.w, yi = std::size_t(sh.k) * sh.p() * sh.q();
  auto run = [&](const Conv2dShape& s, long i0, std::vector<float>& tws) {
    ConvCall c;
    c.sh = s, c.dy = dy + i0 * yi, c.w = w, c.out = dx + i0 * xi, c.wt = row_filters(row, call, sh, w), c.ws = &tws;
    row.run(c);
  };
  if (!parallel_conv(sh)) return run(sh, 0, ws);
  const bool rot = row.filters != Filters::kcrs;
  const int per = per_image_tasks(row.filters) ? 1 : task_images(sh, rot ? rotated_shape(sh) : sh),
            tasks = (sh.n + per - 1) / per;
  parallel_tasks(tasks, [&](int t) {
    const long i0 = long(t) * per, i1 = std::min<long>(sh.n, i0 + per);
    run(sub_batch(sh, i0, i1), i0, thread_ws());
  });
}

void conv2d_backward_filter_im2col(const Conv2dShape& sh, const float* x, const float* dy, float* dw, float* db,
                                   std::vector<float>& ws, Algo algo) {
  check_shape(sh);
  const AlgoRow& row = *resolve(algo, sh, ConvDir::backward_filter, 0);
  const std::size_t xi = std::size_t(sh.c) * sh.h * sh.w, yi = std::size_t(sh.k) * sh.p() * sh.q();
  backward_filter_tasks(sh, dw, db, ws,
                        [&](const Conv2dShape& s, long i0, float* pdw, float* pdb, std::vector<float>& tws) {
                          ConvCall c;
                          c.sh = s, c.x = x + i0 * xi, c.dy = dy + i0 * yi, c.out = pdw, c.db = pdb, c.ws = &tws;
                          row.run(c);
                        });
}

}  // namespace dlb::cpu
