// Work splitting for the sequence kernels: rows (or items) over the kernel threads
// (kernels/cpu/threads.h) in near-equal ranges, or fixed chunks whose partial sums are added in
// chunk order so a reduction's bits do not depend on the thread count.
#pragma once
#include <algorithm>

#include "kernels/cpu/threads.h"

namespace dlb::cpu::seq {

// Below this many floats touched per task, a parallel region costs more than it saves.
constexpr long kMinTaskFloats = 1 << 14;

// fn(lo, hi) over [0, n) items of `floats_per_item` floats, in a few tasks per kernel thread.
template <class F>
void parallel_rows(long n, long floats_per_item, F&& fn) {
  const long by_size = std::max(1L, n * std::max(1L, floats_per_item) / kMinTaskFloats);
  const int tasks = int(std::min<long>({n, by_size, 4L * kernel_threads()}));
  if (tasks <= 1) {
    if (n > 0) fn(0L, n);
    return;
  }
  parallel_tasks(tasks, [&](int t) {
    long lo, hi;
    split_range(n, tasks, t, lo, hi);
    fn(lo, hi);
  });
}

// fn(chunk, lo, hi) for the chunks [chunk * rows_per_chunk, ...) of [0, n): a chunk count that
// depends on n alone, so per-chunk partial sums reduce to the same bits on any thread count.
template <class F>
void parallel_chunks(long n, long rows_per_chunk, F&& fn) {
  const long chunks = (n + rows_per_chunk - 1) / rows_per_chunk;
  auto run = [&](int c) { fn(c, c * rows_per_chunk, std::min(n, (c + 1) * rows_per_chunk)); };
  if (chunks <= 1) {
    if (n > 0) run(0);
    return;
  }
  parallel_tasks(int(chunks), run);
}

}  // namespace dlb::cpu::seq
