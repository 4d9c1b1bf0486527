// CUDA helpers every GPU kernel and case uses: error checks that throw (never abort), device buffers
// whose allocation failure is dlb::OutOfMemory, a tracker of our own device bytes (current and peak,
// the equivalent of torch.cuda.max_memory_allocated), and an event timer.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/common/errors.h"

namespace dlb::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t e, const char* expr, const char* file, int line);

#define DLB_CUDA_CHECK(expr)                                                     \
  do {                                                                           \
    cudaError_t dlb_err_ = (expr);                                               \
    if (dlb_err_ != cudaSuccess) ::dlb::cuda::throw_cuda_error(dlb_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// Tracked device allocation: throws OutOfMemory when cudaMalloc says so.
void* device_alloc(std::size_t bytes);
void device_free(void* p) noexcept;

// Bytes we currently hold through device_alloc, and the high-water mark since the last reset.
std::size_t current_device_bytes();
std::size_t peak_device_bytes();
void reset_peak_device_bytes();

// The driver's view of the current device (cudaMemGetInfo): free and total bytes, counting every
// process's and library's allocations, not only ours.
struct DeviceMemInfo {
  std::size_t free_bytes = 0, total_bytes = 0;
  std::size_t used_bytes() const { return total_bytes - free_bytes; }
};
DeviceMemInfo device_mem_info();

// True when a CUDA device can be used; `reason` (optional) receives the driver's words otherwise.
bool device_available(std::string* reason = nullptr);

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t n) : n_(n), p_(static_cast<T*>(device_alloc(n * sizeof(T)))) {}
  ~DeviceBuffer() { device_free(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : n_(std::exchange(o.n_, 0)), p_(std::exchange(o.p_, nullptr)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(n_, o.n_);
    std::swap(p_, o.p_);
    return *this;
  }
  T* data() const { return p_; }
  std::size_t size() const { return n_; }
  std::size_t bytes() const { return n_ * sizeof(T); }
  void upload(const T* host, std::size_t n, cudaStream_t s = nullptr) {
    DLB_CUDA_CHECK(cudaMemcpyAsync(p_, host, n * sizeof(T), cudaMemcpyHostToDevice, s));
    DLB_CUDA_CHECK(cudaStreamSynchronize(s));
  }
  void download(T* host, std::size_t n, cudaStream_t s = nullptr) const {
    DLB_CUDA_CHECK(cudaMemcpyAsync(host, p_, n * sizeof(T), cudaMemcpyDeviceToHost, s));
    DLB_CUDA_CHECK(cudaStreamSynchronize(s));
  }

 private:
  std::size_t n_ = 0;
  T* p_ = nullptr;
};

// Times work enqueued on a stream with CUDA events: start(); ...enqueue...; seconds() syncs.
class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start(cudaStream_t s = nullptr);
  double stop_seconds(cudaStream_t s = nullptr);  // records, synchronizes, returns elapsed seconds

 private:
  cudaEvent_t a_ = nullptr, b_ = nullptr;
};

}  // namespace dlb::cuda
