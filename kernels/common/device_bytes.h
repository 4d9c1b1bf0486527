// The device bytes dlbench holds, per owner and in all. kernels/cuda/cuda_util.cpp's device_alloc /
// device_free report every allocation here; the timing engine names the owner. Plain C++ and
// header-only, so the engine (built without CUDA too) scopes and resets it.
//
// Why owners: the engine sets up to 16 cases at once (an interleaved window, harness/run/engine.h),
// and one process-wide high-water mark gave every GPU case of a window the same peak_device_bytes
// (the H100 baselines of 2026-11-27: 819.5 MB for every image model at every batch, where mlp's
// weights are 0.4 MB). The engine runs each case's phases inside a MemOwnerScope (its plan index
// + 1): an allocation is charged to the owner in force where it is made and credited back to that
// owner wherever it is freed, so a case's current and peak bytes are its own. Outside any scope
// (owner 0: tests, `dlbench train`) the figures are the process's, every owner's together.
// The owner is per host thread (a case's device work runs on the engine's thread).
#pragma once
#include <algorithm>
#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace dlb {

inline thread_local long t_mem_owner = 0;
inline long mem_owner() { return t_mem_owner; }

// Makes `owner` (> 0) the owner of this thread's allocations until the scope ends.
class MemOwnerScope {
 public:
  explicit MemOwnerScope(long owner) : prev_(t_mem_owner) { t_mem_owner = owner; }
  ~MemOwnerScope() { t_mem_owner = prev_; }
  MemOwnerScope(const MemOwnerScope&) = delete;
  MemOwnerScope& operator=(const MemOwnerScope&) = delete;

 private:
  long prev_;
};

class DeviceBytes {
 public:
  void add(const void* p, std::size_t bytes) {
    std::lock_guard<std::mutex> lk(mu_);
    const long owner = mem_owner();
    sizes_[p] = {bytes, owner};
    grow(all_, bytes);
    if (owner) grow(owners_[owner], bytes);
  }
  // Credits the owner that allocated `p`; a pointer never added is ignored.
  void remove(const void* p) {
    std::lock_guard<std::mutex> lk(mu_);
    const auto it = sizes_.find(p);
    if (it == sizes_.end()) return;
    const auto [bytes, owner] = it->second;
    all_.current -= bytes;
    if (owner) owners_[owner].current -= bytes;
    sizes_.erase(it);
  }
  // The current owner's figures (owner 0: the process's).
  std::size_t current() const {
    std::lock_guard<std::mutex> lk(mu_);
    return usage().current;
  }
  std::size_t peak() const {
    std::lock_guard<std::mutex> lk(mu_);
    return usage().peak;
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lk(mu_);
    Usage& u = mem_owner() ? owners_[mem_owner()] : all_;
    u.peak = u.current;
  }

 private:
  struct Usage {
    std::size_t current = 0, peak = 0;
  };
  static void grow(Usage& u, std::size_t bytes) {
    u.current += bytes;
    u.peak = std::max(u.peak, u.current);
  }
  Usage usage() const {
    if (!mem_owner()) return all_;
    const auto it = owners_.find(mem_owner());
    return it == owners_.end() ? Usage{} : it->second;  // (an owner with nothing yet: zeros)
  }
  mutable std::mutex mu_;
  std::unordered_map<const void*, std::pair<std::size_t, long>> sizes_;
  std::unordered_map<long, Usage> owners_;
  Usage all_;
};

// The process's one ledger of device bytes (cuda_util.cpp reports to it).
inline DeviceBytes& device_bytes() {
  static DeviceBytes d;
  return d;
}

}  // namespace dlb
