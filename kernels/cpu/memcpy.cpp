// Host copies, the verification pattern, cache flushing and the host-memory guard (see memcpy.h).
#include "kernels/cpu/memcpy.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "kernels/common/errors.h"

namespace dlb::cpu {

void fill_pattern(void* dst, std::size_t n, std::uint64_t seed) {
  auto* p = static_cast<unsigned char*>(dst);
  const std::size_t words = n / 8;
  for (std::size_t j = 0; j < words; ++j) {
    const std::uint64_t w = pattern_word(seed, j);
    std::memcpy(p + 8 * j, &w, 8);  // an unaligned-safe 8-byte store
  }
  if (n % 8) {
    const std::uint64_t w = pattern_word(seed, words);
    std::memcpy(p + 8 * words, &w, n % 8);  // little-endian: the word's low bytes first
  }
}

PatternCheck check_pattern(const void* ptr, std::size_t n, std::uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(ptr);
  PatternCheck c;
  auto count_bytes = [&](std::size_t off, std::uint64_t got, std::uint64_t want, std::size_t len) {
    for (std::size_t b = 0; b < len; ++b) {
      if (((got >> (8 * b)) & 0xFF) != ((want >> (8 * b)) & 0xFF)) {
        if (c.mismatches == 0) c.first = off + b;
        ++c.mismatches;
      }
    }
  };
  const std::size_t words = n / 8;
  for (std::size_t j = 0; j < words; ++j) {
    std::uint64_t got;
    std::memcpy(&got, p + 8 * j, 8);
    const std::uint64_t want = pattern_word(seed, j);
    if (got != want) count_bytes(8 * j, got, want, 8);
  }
  if (n % 8) {
    std::uint64_t got = 0;
    std::memcpy(&got, p + 8 * words, n % 8);
    count_bytes(8 * words, got, pattern_word(seed, words), n % 8);
  }
  return c;
}

std::string describe(const PatternCheck& c, std::size_t n) {
  std::ostringstream s;
  if (c.ok()) s << "all " << n << " bytes match";
  else s << c.mismatches << " of " << n << " bytes differ, first at offset " << c.first;
  return s.str();
}

void memcpy_host_reference(void* dst, const void* src, std::size_t n) {
  auto* d = static_cast<volatile unsigned char*>(dst);  // volatile: keep it the plain byte loop
  const auto* s = static_cast<const unsigned char*>(src);
  for (std::size_t i = 0; i < n; ++i) d[i] = s[i];
}

void memcpy_host_libc(void* dst, const void* src, std::size_t n) { std::memcpy(dst, src, n); }

PatternCheck verify_host_copy(const CopyFn& copy, void* dst, void* src, std::size_t n, std::uint64_t seed) {
  fill_pattern(src, n, seed);
  fill_pattern(dst, n, poison_seed(seed));
  copy(dst, src, n);
  return check_pattern(dst, n, seed);
}

std::size_t last_level_cache_bytes() {
  for (int name : {_SC_LEVEL4_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    const long v = sysconf(name);
    if (v > 0) return static_cast<std::size_t>(v);
  }
  for (int idx = 4; idx >= 2; --idx) {  // sysfs "32768K"
    std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(idx) + "/size");
    std::size_t v = 0;
    char unit = 0;
    if (f >> v) {
      f >> unit;
      if (unit == 'K') v <<= 10;
      else if (unit == 'M') v <<= 20;
      if (v > 0) return v;
    }
  }
  return std::size_t(32) << 20;
}

CacheFlusher::CacheFlusher(std::size_t bytes) {
  if (bytes == 0) bytes = std::clamp<std::size_t>(2 * last_level_cache_bytes(), std::size_t(32) << 20, std::size_t(512) << 20);
  n_words_ = std::max<std::size_t>(1, bytes / sizeof(std::uint64_t));
  require_host_bytes(n_words_ * sizeof(std::uint64_t), "cache-flush buffer");
  buf_ = static_cast<std::uint64_t*>(std::calloc(n_words_, sizeof(std::uint64_t)));
  if (!buf_) throw OutOfMemory("host: cache-flush buffer of " + std::to_string(bytes) + " bytes");
}

CacheFlusher::~CacheFlusher() { std::free(buf_); }

void CacheFlusher::flush() {
  // Read-modify-write: every line is loaded into the cache hierarchy and dirtied, pushing ours out.
  const std::uint64_t t = ++tick_;
  volatile std::uint64_t* sink = buf_;  // one volatile read at the end keeps the loop alive
  for (std::size_t i = 0; i < n_words_; ++i) buf_[i] += t;
  (void)sink[n_words_ - 1];
}

std::size_t host_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  std::size_t kb = 0;
  std::string unit;
  while (f >> key >> kb) {
    std::getline(f, unit);
    if (key == "MemAvailable:") return kb * 1024;
  }
  return 0;
}

void require_host_bytes(std::size_t bytes, const std::string& what) {
  const std::size_t avail = host_available_bytes();
  if (avail > 0 && bytes > avail / 10 * 9)
    throw OutOfMemory("host: " + what + " needs " + std::to_string(bytes) + " bytes, MemAvailable is " +
                      std::to_string(avail));
}

std::size_t address_space_left() {
  struct rlimit rl {};
  if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return SIZE_MAX;
  std::ifstream f("/proc/self/statm");
  std::size_t pages = 0;
  if (!(f >> pages)) return SIZE_MAX;
  const std::size_t mapped = pages * std::size_t(sysconf(_SC_PAGESIZE));
  return rl.rlim_cur > mapped ? std::size_t(rl.rlim_cur - mapped) : 0;
}

void require_address_space(std::size_t bytes, const std::string& what) {
  const std::size_t left = address_space_left();
  if (left >= bytes) return;
  throw OutOfMemory("host: " + what + " needs " + std::to_string(bytes >> 20) + " MiB of address space, ulimit -v leaves " +
                    std::to_string(left >> 20) + " MiB");
}

HostPtr host_alloc(std::size_t bytes, const std::string& what) {
  void* p = nullptr;
  if (posix_memalign(&p, 64, std::max<std::size_t>(bytes, 1)) != 0 || !p)
    throw OutOfMemory("host: malloc of " + std::to_string(bytes) + " bytes for " + what);
  return HostPtr(static_cast<unsigned char*>(p));
}

}  // namespace dlb::cpu
