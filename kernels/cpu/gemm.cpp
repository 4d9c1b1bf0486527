// CPU sgemm implementations (see gemm.h).
#include "kernels/cpu/gemm.h"

#include <cblas.h>
#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <cstring>
#include <vector>

#include "kernels/common/errors.h"
#include "kernels/cpu/openblas_core.h"
#include "kernels/cpu/threads.h"

namespace dlb::cpu {

std::string openblas_reserve_buffers(bool pool) {
  struct rlimit rl {};
  if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return "";
  static bool blas_done = false, pool_done = false;
  // Our kernel threads first, whatever the suite: oneDNN's calls run on them too. Each maps its stack
  // and malloc arena (72 MiB) as it starts, so they are in what the trial below finds left.
  start_kernel_threads();
  // OpenBLAS's BUFFER_SIZE on x86-64 is 128 MiB (+ a page). Its worker threads take theirs when they
  // start (at load: a worker that could not is stuck, and this trial then fails too); the calling
  // thread takes one at its first sgemm, and so does each other thread that calls it.
  const std::size_t mib = std::size_t(1) << 20;
  const int pool_threads = pool ? kernel_threads() - 1 : 0;
  std::size_t need = 64 * mib;  // room for the first case's own data
  if (!blas_done) need += 130 * mib;
  if (pool && !pool_done) need += std::size_t(std::max(0, pool_threads)) * 130 * mib;
  void* p = mmap(nullptr, need, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return "the address-space limit (ulimit -v " + std::to_string(rl.rlim_cur >> 10) + " KiB) leaves less than the " +
           std::to_string(need / mib) + " MiB that OpenBLAS's work buffers need here";
  munmap(p, need);
  std::vector<float> a(256 * 256, 1.0f), c(256 * 256);
  if (!blas_done) {  // every OpenBLAS thread takes its buffer
    sgemm_forward_openblas(a.data(), a.data(), c.data(), 256, 256, 256);
    blas_done = true;
  }
  if (pool && !pool_done && pool_threads > 0) {
    // The kernel threads call single-threaded sgemms at the same time, each holding a buffer while
    // OpenBLAS's worker holds its own for good. Taken and held here all at once, from this thread,
    // so that OpenBLAS's table has one per kernel thread (a sgemm per thread alone cannot force that:
    // the first may return its buffer before the next thread asks, and a later overlap then maps a
    // new one, retrying forever when there is no room).
    using alloc_fn = void* (*)(int);
    using free_fn = void (*)(void*);
    const auto take = reinterpret_cast<alloc_fn>(dlsym(RTLD_DEFAULT, "blas_memory_alloc"));
    const auto give = reinterpret_cast<free_fn>(dlsym(RTLD_DEFAULT, "blas_memory_free"));
    if (take && give) {
      std::vector<void*> held;
      for (int i = 0; i <= pool_threads; ++i) held.push_back(take(0));
      for (void* b : held) give(b);
    }
    // An OpenBLAS built with USE_TLS keeps a table per thread instead: one single-threaded sgemm on
    // each pool thread fills those; a task waits (at most 0.5 s) for the others to start so that no
    // thread takes two of them.
    std::atomic<int> started{0};
    const int tasks = pool_threads + 1;
    parallel_tasks(tasks, [&](int) {
      std::vector<float> c2(64 * 64);
      sgemm_forward_openblas(a.data(), a.data(), c2.data(), 64, 64, 64);
      started.fetch_add(1);
      const auto t0 = std::chrono::steady_clock::now();
      while (started.load() < tasks && std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(500))
        std::this_thread::yield();
    });
  }
  pool_done = pool_done || pool;
  return "";
}

void sgemm_forward_openblas(const float* a, const float* b, float* c, long m, long n, long k) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), 1.0f, a, static_cast<blasint>(k), b, static_cast<blasint>(n), 0.0f, c,
              static_cast<blasint>(n));
}

// Blocks sized for a 32 KiB L1 / 512 KiB L2: a KC x NC panel of B (256 x 256 floats = 256 KiB)
// stays in L2 while MC rows of A stream through; the innermost j loop is contiguous in B and C,
// so the compiler vectorises it (8 floats per AVX2 FMA). Napkin: 2mnk flops, B re-read m/MC times.
// Cloned for AVX2+FMA and a baseline; the loader picks the clone this CPU runs.
__attribute__((target_clones("arch=haswell", "default")))
void sgemm_forward_blocked(const float* a, const float* b, float* c, long m, long n, long k) {
  constexpr long MC = 64, KC = 256, NC = 256;
  std::fill(c, c + static_cast<std::size_t>(m) * n, 0.0f);
  for (long j0 = 0; j0 < n; j0 += NC) {
    const long nc = std::min(NC, n - j0);
    for (long p0 = 0; p0 < k; p0 += KC) {
      const long kc = std::min(KC, k - p0);
      for (long i0 = 0; i0 < m; i0 += MC) {
        const long mc = std::min(MC, m - i0);
        for (long i = i0; i < i0 + mc; ++i) {
          float* __restrict ci = c + static_cast<std::size_t>(i) * n + j0;
          const float* ai = a + static_cast<std::size_t>(i) * k + p0;
          for (long p = 0; p < kc; ++p) {
            const float aip = ai[p];
            const float* __restrict bp = b + static_cast<std::size_t>(p0 + p) * n + j0;
            for (long j = 0; j < nc; ++j) ci[j] += aip * bp[j];
          }
        }
      }
    }
  }
}

namespace {
// cblas_sbgemm(order, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc), bfloat16 = 16 bits.
using sbgemm_fn = void (*)(int, int, int, blasint, blasint, blasint, float, const std::uint16_t*, blasint,
                           const std::uint16_t*, blasint, float, float*, blasint);
sbgemm_fn find_sbgemm() { return reinterpret_cast<sbgemm_fn>(dlsym(RTLD_DEFAULT, "cblas_sbgemm")); }
}  // namespace

void sbgemm_forward_openblas(const std::uint16_t* a, const std::uint16_t* b, float* c, long m, long n, long k) {
  static const sbgemm_fn f = find_sbgemm();
  if (!f) throw Unsupported("OpenBLAS has no cblas_sbgemm (built without BUILD_BFLOAT16)");
  f(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(m), static_cast<blasint>(n),
    static_cast<blasint>(k), 1.0f, a, static_cast<blasint>(k), b, static_cast<blasint>(n), 0.0f, c,
    static_cast<blasint>(n));
}

bool openblas_has_sbgemm() { return find_sbgemm() != nullptr; }

std::string cpu_bf16_gemm_unsupported_reason() {
  const auto flags = read_cpu_flags();
  const bool isa = flags.count("avx512_bf16") > 0;
  // Looked up at run time: Debian's OpenBLAS is built without BUILD_BFLOAT16 and has no sbgemm.
  const bool lib = find_sbgemm() != nullptr;
  if (isa && lib) return "";
  std::string why;
  if (!isa) why = "CPU has no avx512_bf16";
  if (!lib) why += std::string(why.empty() ? "" : "; ") + "OpenBLAS " + "has no cblas_sbgemm (built without BUILD_BFLOAT16)";
  return why;
}

}  // namespace dlb::cpu
