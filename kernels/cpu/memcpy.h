// Host side of the transfer suite: the byte pattern every copy is verified with (shared with the
// CUDA kernels in kernels/cuda/transfer.cu), the plain reference copy and libc memcpy, a cache
// flusher (bandwidthTest's way: write a buffer larger than the last-level cache) and the host-memory
// guard that turns "more than this machine has" into dlb::OutOfMemory before anything is touched.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>

#ifndef DLB_HD
#if defined(__CUDACC__)
#define DLB_HD __host__ __device__
#else
#define DLB_HD
#endif
#endif

namespace dlb::cpu {

// Word j (bytes 8j..8j+7, little-endian) of the pattern for `seed`. For a fixed seed the map
// j -> word is a bijection (odd multiply, xor-shifts), so a shifted, truncated, stale (another seed)
// or untouched destination never passes. A buffer of n bytes holds the first n pattern bytes.
DLB_HD inline std::uint64_t pattern_word(std::uint64_t seed, std::uint64_t j) {
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ULL + (j + 1) * 0xD1B54A32D192ED03ULL;
  x ^= x >> 32;
  x *= 0xD6E8FEB86659FD93ULL;
  x ^= x >> 32;
  return x;
}

// Float j of the overlap experiment's input: k * 2^-24 in [0, 1), never NaN, Inf or subnormal, so
// host and device arithmetic on it agree bit for bit.
DLB_HD inline float pattern_float(std::uint64_t seed, std::uint64_t j) {
  return static_cast<float>(pattern_word(seed, j) >> 40) * (1.0f / 16777216.0f);
}

// Seed of the poison written into a destination before a verified copy (never equal to `seed`).
DLB_HD inline std::uint64_t poison_seed(std::uint64_t seed) { return ~seed ^ 0x5A5A5A5A5A5A5A5AULL; }

// dst[0..n) <- the pattern for `seed`.
void fill_pattern(void* dst, std::size_t n, std::uint64_t seed);

struct PatternCheck {
  std::size_t mismatches = 0;  // bytes that differ from the pattern
  std::size_t first = 0;       // offset of the first differing byte (when mismatches > 0)
  bool ok() const { return mismatches == 0; }
};
// Compares p[0..n) with the pattern for `seed`, byte by byte (every byte is read).
PatternCheck check_pattern(const void* p, std::size_t n, std::uint64_t seed);
// "12 of 1048576 bytes differ, first at offset 4096" or "all 1048576 bytes match".
std::string describe(const PatternCheck& c, std::size_t n);

// Plain reference: one byte at a time.
void memcpy_host_reference(void* dst, const void* src, std::size_t n);
// libc memcpy (what a pageable cudaMemcpy's staging copy costs on this CPU).
void memcpy_host_libc(void* dst, const void* src, std::size_t n);

using CopyFn = std::function<void(void* dst, const void* src, std::size_t n)>;
// One verified round: src <- pattern(seed), dst <- poison, copy(dst, src, n), check dst.
PatternCheck verify_host_copy(const CopyFn& copy, void* dst, void* src, std::size_t n, std::uint64_t seed);

// Last-level cache of this CPU in bytes (sysconf, then sysfs; 32 MiB when neither says).
std::size_t last_level_cache_bytes();

// Evicts our buffers from the CPU caches by read-modify-writing a buffer of 2 x LLC (at least
// 32 MiB, at most 512 MiB). Plain stores on purpose: libc memset switches to non-temporal stores for
// big sizes, and those would bypass the very caches we want to fill.
class CacheFlusher {
 public:
  explicit CacheFlusher(std::size_t bytes = 0);  // 0: 2 x LLC, clamped; throws OutOfMemory
  ~CacheFlusher();
  CacheFlusher(const CacheFlusher&) = delete;
  CacheFlusher& operator=(const CacheFlusher&) = delete;
  void flush();
  std::size_t bytes() const { return n_words_ * sizeof(std::uint64_t); }

 private:
  std::uint64_t* buf_ = nullptr;
  std::size_t n_words_ = 0;
  std::uint64_t tick_ = 0;
};

// MemAvailable from /proc/meminfo in bytes; 0 when it cannot be read.
std::size_t host_available_bytes();
// Throws OutOfMemory("host: <what> needs X bytes, MemAvailable is Y") when `bytes` exceed 90% of
// MemAvailable, so a size larger than this machine is a recorded result, never an OOM kill.
void require_host_bytes(std::size_t bytes, const std::string& what);

// Address space this process may still map under `ulimit -v` (RLIMIT_AS less what is mapped now,
// /proc/self/statm); SIZE_MAX without a limit. Thread stacks and malloc arenas count, touched or not.
std::size_t address_space_left();
// Throws OutOfMemory("host: <what> needs X MiB of address space, ulimit -v leaves Y MiB") when fewer
// than `bytes` are left: for libraries that crash instead of failing when a mapping is refused.
void require_address_space(std::size_t bytes, const std::string& what);

struct FreeDeleter {
  void operator()(void* p) const noexcept { std::free(p); }
};
using HostPtr = std::unique_ptr<unsigned char, FreeDeleter>;
// Pageable host memory (malloc, 64-byte aligned); OutOfMemory when it cannot be had.
HostPtr host_alloc(std::size_t bytes, const std::string& what);

}  // namespace dlb::cpu
