// A tiny persistent thread pool for the CPU training kernels. The kernels cut their work into tasks
// over the batch (image chunks, planes, parameter ranges); each task calls single-threaded OpenBLAS
// GEMMs. Why not OpenBLAS's own threads: at the lecture's shapes a 2-thread GEMM gains little
// (conv2's GEMMs are 16 rows deep), while im2col, col2im, pooling, bias and SGD stay on one thread,
// and OpenBLAS's idle worker spins next to that serial code. Splitting the batch runs all of it on
// every core.
//
// Tasks are claimed one at a time from a shared counter, by the calling thread too, so nobody waits
// for work that has not started: on a shared machine, a pool thread whose core was taken by another
// process simply ends up with fewer tasks (the calling thread runs the rest).
#pragma once
#include <functional>

namespace dlb::cpu {

// Threads the CPU kernels split work over: the cores this process may run on (sched_getaffinity),
// or DLB_CPU_THREADS when set (1 = everything on the calling thread). Read once.
int kernel_threads();

// DLB_CPU_THREADS=N holds OpenBLAS's own team to N as well (oneDNN's OpenMP team is held per calling
// thread, kernels/cpu/onednn/): a run asked to compute on one thread computes on one, libraries
// included. Called once at start by the CLI; a no-op without DLB_CPU_THREADS.
void hold_library_threads();

// Starts the pool's workers now if they are not running (they start at the first parallel_tasks
// otherwise): each maps its stack and malloc arena at once, so what is left of an address-space
// limit can be measured after it (gemm.h: openblas_reserve_buffers).
void start_kernel_threads();

// DLB_CPU_THREADS may ask for 1..kMaxKernelThreads threads (the CLI refuses any other value at start).
constexpr int kMaxKernelThreads = 64;

// RAII: the calling thread sees kernel_threads() <= n for the scope's lifetime; with n = 1 every
// kernel it calls takes its single-threaded path (tests compare the two paths with it).
class KernelThreadsLimit {
 public:
  explicit KernelThreadsLimit(int n);
  ~KernelThreadsLimit();
  KernelThreadsLimit(const KernelThreadsLimit&) = delete;
  KernelThreadsLimit& operator=(const KernelThreadsLimit&) = delete;

 private:
  int prev_;
};

// Runs fn(task) for every task in [0, tasks) and returns when all have finished. Tasks may run in
// any order and on any thread (the calling thread included), so fn must write disjoint memory per
// task; per-thread scratch can live in thread_local storage (read inside fn). The first exception a
// task throws is rethrown here, after the others have finished (tasks not yet started are skipped).
// tasks <= 1, kernel_threads() == 1, a call from inside a task (nested) or a call while another
// thread runs a region: the tasks run in order on the calling thread. OpenBLAS runs single-threaded
// during the call.
void parallel_tasks(int tasks, const std::function<void(int)>& fn);

// Whether the calling thread runs a task of parallel_tasks now (a nested call runs in order on it).
bool in_parallel_region();

// [lo, hi) of part `i` when [0, n) is split into `parts` near-equal ranges (the first n % parts
// parts one longer).
inline void split_range(long n, int parts, int i, long& lo, long& hi) {
  const long q = n / parts, r = n % parts;
  lo = i * q + (i < r ? i : r);
  hi = lo + q + (i < r ? 1 : 0);
}

// RAII: OpenBLAS at `threads` threads for the scope's lifetime, the previous count restored after.
// The CPU trainer holds one at 1 thread for a whole epoch, so OpenBLAS's worker threads sleep
// instead of spinning between its small GEMMs (the Linear layers) next to our pool.
class BlasThreadsScope {
 public:
  explicit BlasThreadsScope(int threads);
  ~BlasThreadsScope();
  BlasThreadsScope(const BlasThreadsScope&) = delete;
  BlasThreadsScope& operator=(const BlasThreadsScope&) = delete;

 private:
  int prev_;
};

}  // namespace dlb::cpu
