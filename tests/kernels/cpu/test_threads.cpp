// The CPU kernels' thread pool (kernels/cpu/threads.h): every task runs exactly once over many
// regions and task counts, nested and concurrent calls, exceptions, the thread limit, the range
// split, and the OpenBLAS thread scope.
#include <gtest/gtest.h>

#include <cblas.h>

#include <atomic>
#include <set>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/common/errors.h"
#include "kernels/cpu/threads.h"

using namespace dlb;

TEST(Threads, SplitRangeCoversEverythingOnce) {
  for (long n : {0L, 1L, 2L, 3L, 7L, 64L, 1001L})
    for (int parts : {1, 2, 3, 8}) {
      long expect = 0, smallest = n, largest = 0;
      for (int i = 0; i < parts; ++i) {
        long lo, hi;
        cpu::split_range(n, parts, i, lo, hi);
        EXPECT_EQ(lo, expect) << n << " / " << parts;
        expect = hi;
        smallest = std::min(smallest, hi - lo), largest = std::max(largest, hi - lo);
      }
      EXPECT_EQ(expect, n);
      EXPECT_LE(largest - smallest, 1);
    }
}

TEST(Threads, EveryTaskRunsExactlyOnce) {
  EXPECT_GE(cpu::kernel_threads(), 1);
  for (int tasks : {0, 1, 2, 3, 5, 64, 1000}) {
    std::vector<std::atomic<int>> hits(std::max(tasks, 1));
    for (int round = 0; round < 200; ++round) {
      cpu::parallel_tasks(tasks, [&](int t) { hits[t].fetch_add(1, std::memory_order_relaxed); });
    }
    for (int t = 0; t < tasks; ++t) ASSERT_EQ(hits[t].load(), 200) << "task " << t << " of " << tasks;
  }
}

TEST(Threads, TasksSeeTheCallersWritesAndTheCallerSeesTheirs) {
  std::vector<long> data(4096);
  for (int round = 0; round < 100; ++round) {
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = long(i) * round;
    cpu::parallel_tasks(16, [&](int t) {
      long lo, hi;
      cpu::split_range(long(data.size()), 16, t, lo, hi);
      for (long i = lo; i < hi; ++i) data[i] += 1;
    });
    for (std::size_t i = 0; i < data.size(); ++i) ASSERT_EQ(data[i], long(i) * round + 1);
  }
}

// A task that starts a region runs the inner tasks itself, all of them.
TEST(Threads, NestedRegionsRunInline) {
  std::atomic<int> inner{0};
  cpu::parallel_tasks(4, [&](int) { cpu::parallel_tasks(3, [&](int) { inner.fetch_add(1); }); });
  EXPECT_EQ(inner.load(), 12);
}

// Two threads starting regions at once: one gets the pool, the other runs its tasks itself.
TEST(Threads, ConcurrentCallersBothComplete) {
  std::atomic<long> sum_a{0}, sum_b{0};
  auto work = [](std::atomic<long>& sum) {
    for (int round = 0; round < 300; ++round) cpu::parallel_tasks(7, [&](int t) { sum.fetch_add(t + 1); });
  };
  std::thread a([&] { work(sum_a); }), b([&] { work(sum_b); });
  a.join();
  b.join();
  EXPECT_EQ(sum_a.load(), 300L * 28);
  EXPECT_EQ(sum_b.load(), 300L * 28);
}

TEST(Threads, ExceptionReachesTheCallerAndThePoolStaysUsable) {
  for (int round = 0; round < 20; ++round)
    EXPECT_THROW(cpu::parallel_tasks(9, [&](int t) {
                   if (t == 5) throw InputError("task 5");
                 }),
                 InputError);
  std::atomic<int> n{0};
  cpu::parallel_tasks(9, [&](int) { n.fetch_add(1); });
  EXPECT_EQ(n.load(), 9);
}

// Under a limit of 1 every task runs on the calling thread; without it, tasks may run elsewhere
// (not asserted: the calling thread may legitimately claim them all).
TEST(Threads, LimitOfOneRunsOnTheCallingThread) {
  const int all = cpu::kernel_threads();
  {
    cpu::KernelThreadsLimit one(1);
    EXPECT_EQ(cpu::kernel_threads(), 1);
    std::mutex mu;
    std::set<std::thread::id> ids;
    cpu::parallel_tasks(32, [&](int) {
      std::lock_guard<std::mutex> l(mu);
      ids.insert(std::this_thread::get_id());
    });
    ASSERT_EQ(ids.size(), 1u);
    EXPECT_EQ(*ids.begin(), std::this_thread::get_id());
  }
  EXPECT_EQ(cpu::kernel_threads(), all);
}

TEST(Threads, BlasThreadsScopeRestores) {
  const int before = openblas_get_num_threads();
  {
    cpu::BlasThreadsScope one(1);
    EXPECT_EQ(openblas_get_num_threads(), 1);
    {
      cpu::BlasThreadsScope again(1);
      EXPECT_EQ(openblas_get_num_threads(), 1);
    }
    EXPECT_EQ(openblas_get_num_threads(), 1);
  }
  EXPECT_EQ(openblas_get_num_threads(), before);
  // A region runs OpenBLAS single-threaded and gives the count back.
  std::atomic<int> seen{0};
  cpu::parallel_tasks(4, [&](int) { seen.fetch_add(openblas_get_num_threads()); });
  if (cpu::kernel_threads() > 1) {
    EXPECT_EQ(seen.load(), 4);
  }
  EXPECT_EQ(openblas_get_num_threads(), before);
}
