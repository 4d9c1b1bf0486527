// The CPU kernels' thread pool (see threads.h). Workers are created once, on first use, and never
// joined (the pool lives as long as the process).
//
// A region publishes one 64-bit word, work_ = generation << 32 | tasks << 16 | next task. Every
// thread (the caller too) claims a task by a compare-and-swap of next; a claim only succeeds in the
// current generation, and the caller returns only when every task has finished, so a late worker
// can never run a task of a region that is over, nor see a half-written one. Waiting workers spin
// briefly (the serial code between two regions of a training step takes microseconds), then yield
// the core (on a shared machine they may sit on the caller's core), then sleep on a condition
// variable.
#include "kernels/cpu/threads.h"

#include <cblas.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DLB_CPU_RELAX() _mm_pause()
#else
#define DLB_CPU_RELAX() std::this_thread::yield()
#endif

namespace dlb::cpu {
namespace {

constexpr int kMaxThreads = kMaxKernelThreads;
constexpr int kMaxTasks = 0xffff;  // tasks live in 16 bits of work_

int detect_threads() {
  if (const char* e = std::getenv("DLB_CPU_THREADS"); e && *e) {  // checked by the CLI; decimal 1..64
    char* end = nullptr;
    const long v = std::strtol(e, &end, 10);
    if (*end == '\0' && v >= 1 && v <= kMaxThreads) return static_cast<int>(v);
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  int n = 0;
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
  if (n < 1) n = int(std::thread::hardware_concurrency());
  return std::max(1, std::min(n, kMaxThreads));
}

int all_threads() {
  static const int n = detect_threads();
  return n;
}

thread_local bool t_in_region = false;
thread_local int t_limit = 0;  // KernelThreadsLimit of this thread (0: none)

class Pool {
 public:
  // A worker that cannot start (no room for its stack under ulimit -v) leaves the pool smaller: the
  // caller claims the tasks nobody else takes.
  explicit Pool(int workers) {
    for (int i = 0; i < workers; ++i) {
      try {
        std::thread([this] { loop(); }).detach();
      } catch (const std::system_error&) {
        break;
      }
    }
  }

  // False when another thread is running a region (the caller then runs its tasks itself).
  bool try_run(int tasks, const std::function<void(int)>& fn) {
    std::unique_lock<std::mutex> busy(run_mu_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    fn_ = &fn;
    error_ = nullptr;
    failed_.store(false, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    gen_ = (gen_ + 1) & 0xffffffffu;
    work_.store(gen_ << 32 | std::uint64_t(tasks) << 16, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      { std::lock_guard<std::mutex> l(mu_); }
      cv_.notify_all();
    }
    t_in_region = true;
    run_tasks(gen_);
    for (int spins = 0; done_.load(std::memory_order_acquire) != tasks; ++spins) {
      if (spins < kCallerSpins) DLB_CPU_RELAX();
      else std::this_thread::yield();
    }
    t_in_region = false;
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  static constexpr int kCallerSpins = 2000;
  // A waiting worker spins this long, then yields its core until kWorkerYieldUs, then sleeps.
  static constexpr long kWorkerSpinUs = 30, kWorkerYieldUs = 300;

  // Claims and runs tasks of generation `gen` until none is left.
  void run_tasks(std::uint64_t gen) {
    std::uint64_t w = work_.load(std::memory_order_acquire);
    for (;;) {
      const std::uint64_t next = w & 0xffff, tasks = (w >> 16) & 0xffff;
      if ((w >> 32) != gen || next >= tasks) return;
      if (!work_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
      if (!failed_.load(std::memory_order_relaxed)) {
        try {
          (*fn_)(int(next));
        } catch (...) {
          std::lock_guard<std::mutex> l(err_mu_);
          if (!error_) error_ = std::current_exception();
          failed_.store(true, std::memory_order_relaxed);
        }
      }
      done_.fetch_add(1, std::memory_order_release);
      w = work_.load(std::memory_order_acquire);
    }
  }

  void loop() {
    t_in_region = true;  // a task that calls parallel_tasks runs its inner tasks itself
    // glibc gives a thread its malloc arena (64 MiB of address space) at its first malloc: take it
    // now, when the pool starts, not in the middle of a task where an address-space budget
    // (start_kernel_threads) did not count it.
    std::free(std::malloc(64));
    std::uint64_t seen = 0;
    for (;;) {
      std::uint64_t gen = work_.load(std::memory_order_acquire) >> 32;
      if (gen == seen) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; (gen = work_.load(std::memory_order_acquire) >> 32) == seen; ++i) {
          if ((i & 63) != 63) {
            DLB_CPU_RELAX();
            continue;
          }
          const auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
          if (us < kWorkerSpinUs) continue;
          if (us < kWorkerYieldUs) {
            std::this_thread::yield();
            continue;
          }
          std::unique_lock<std::mutex> l(mu_);
          sleepers_.fetch_add(1, std::memory_order_seq_cst);
          cv_.wait(l, [&] { return (work_.load(std::memory_order_seq_cst) >> 32) != seen; });
          sleepers_.fetch_sub(1, std::memory_order_relaxed);
        }
      }
      seen = gen;
      run_tasks(gen);
    }
  }

  std::mutex run_mu_;  // one region at a time
  std::mutex mu_;      // with cv_: sleeping workers
  std::condition_variable cv_;
  std::atomic<int> sleepers_{0};
  std::atomic<std::uint64_t> work_{0};  // generation << 32 | tasks << 16 | next task
  std::atomic<int> done_{0};            // tasks of this region finished
  std::atomic<bool> failed_{false};     // a task threw: skip the rest
  std::uint64_t gen_ = 0;               // the caller's copy of the generation
  const std::function<void(int)>* fn_ = nullptr;
  std::mutex err_mu_;
  std::exception_ptr error_;
};

Pool& pool() {
  static Pool* p = new Pool(all_threads() - 1);  // never destroyed: workers outlive main()
  return *p;
}

}  // namespace

void hold_library_threads() {
  if (const char* e = std::getenv("DLB_CPU_THREADS"); !e || !*e) return;
  if (openblas_get_num_threads() > all_threads()) openblas_set_num_threads(all_threads());
}

void start_kernel_threads() {
  if (all_threads() > 1) pool();
}

bool in_parallel_region() { return t_in_region; }

int kernel_threads() { return t_limit > 0 ? std::min(all_threads(), t_limit) : all_threads(); }

KernelThreadsLimit::KernelThreadsLimit(int n) : prev_(t_limit) { t_limit = std::max(1, n); }
KernelThreadsLimit::~KernelThreadsLimit() { t_limit = prev_; }

void parallel_tasks(int tasks, const std::function<void(int)>& fn) {
  if (tasks > 1 && tasks <= kMaxTasks && kernel_threads() > 1 && !t_in_region) {
    BlasThreadsScope one(1);
    if (pool().try_run(tasks, fn)) return;
  }
  for (int i = 0; i < tasks; ++i) fn(i);
}

BlasThreadsScope::BlasThreadsScope(int threads) : prev_(openblas_get_num_threads()) {
  if (threads != prev_) openblas_set_num_threads(threads);
}

BlasThreadsScope::~BlasThreadsScope() {
  if (openblas_get_num_threads() != prev_) openblas_set_num_threads(prev_);
}

}  // namespace dlb::cpu
