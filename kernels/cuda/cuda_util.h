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
// Throws std::runtime_error(why) when `s` is being captured into a CUDA graph: for callers about to
// allocate (or search) on their first use, which a capture cannot record.
void refuse_inside_capture(cudaStream_t s, const std::string& why);

// Bytes we currently hold through device_alloc, and the high-water mark since the last reset: the
// case's own inside the timing engine's scope of a case, else the process's
// (kernels/common/device_bytes.h).
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

// Makes the device of "cuda:N" ("cuda": 0) current (cudaSetDevice) and returns N: the trainers and
// the decoder call it before making their streams and buffers.
int use_device(const std::string& device);

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

// Page-locked host memory (cudaHostAlloc), optionally write-combined (fast for the GPU to read,
// slow for the CPU to read back). A refused allocation is dlb::OutOfMemory naming `what`.
// ensure(bytes) grows it (contents not kept); an empty one holds nothing.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(std::size_t bytes, bool write_combined = false, const std::string& what = "pinned host memory");
  ~PinnedBuffer() { release(); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  PinnedBuffer(PinnedBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), wc_(o.wc_) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    std::swap(p_, o.p_), std::swap(bytes_, o.bytes_), std::swap(wc_, o.wc_);
    return *this;
  }
  void ensure(std::size_t bytes, const std::string& what = "pinned host memory");
  void release() noexcept;
  void* data() const { return p_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
  bool wc_ = false;
};

// A stream of our own: non-blocking (no implicit sync with the legacy default stream).
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  operator cudaStream_t() const { return s_; }
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

// An event; timing = false (cudaEventDisableTiming) for events that only order work across streams.
class Event {
 public:
  explicit Event(bool timing = true);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  operator cudaEvent_t() const { return e_; }
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

// Seconds between two recorded events (a must be recorded before b; b is waited for).
double elapsed_seconds(cudaEvent_t a, cudaEvent_t b);

// Times work enqueued on a stream with CUDA events: start(); ...enqueue...; stop_seconds() syncs.
class EventTimer {
 public:
  void start(cudaStream_t s = nullptr);
  double stop_seconds(cudaStream_t s = nullptr);  // records, synchronizes, returns elapsed seconds

 private:
  Event a_, b_;
};

}  // namespace dlb::cuda
