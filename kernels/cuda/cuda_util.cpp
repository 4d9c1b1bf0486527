// CUDA helpers (see cuda_util.h).
#include "kernels/cuda/cuda_util.h"

#include <algorithm>

#include "kernels/common/device_bytes.h"
#include "kernels/cuda/stream_scratch.h"

namespace dlb::cuda {

void throw_cuda_error(cudaError_t e, const char* expr, const char* file, int line) {
  // A failing runtime call also leaves its error as the thread's "last error"; a non-sticky one
  // (out of memory, invalid value, no kernel image...) would otherwise be reported again by the next
  // launch check (DLB_CUDA_CHECK(cudaGetLastError())) in an unrelated, later case.
  cudaGetLastError();
  if (e == cudaErrorMemoryAllocation) throw OutOfMemory(std::string("device: ") + expr);
  throw std::runtime_error(std::string("CUDA error ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                           ") in " + expr + " at " + file + ":" + std::to_string(line));
}

void* device_alloc(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear the sticky-free error so later calls work
    throw OutOfMemory("cudaMalloc of " + std::to_string(bytes) + " bytes");
  }
  if (e != cudaSuccess) throw_cuda_error(e, "cudaMalloc", __FILE__, __LINE__);
  device_bytes().add(p, bytes);  // charged to the case in force (kernels/common/device_bytes.h)
  return p;
}

void device_free(void* p) noexcept {
  if (!p) return;
  device_bytes().remove(p);
  cudaFree(p);
}

std::size_t current_device_bytes() { return device_bytes().current(); }
std::size_t peak_device_bytes() { return device_bytes().peak(); }
void reset_peak_device_bytes() { device_bytes().reset_peak(); }

DeviceMemInfo device_mem_info() {
  DeviceMemInfo m;
  DLB_CUDA_CHECK(cudaMemGetInfo(&m.free_bytes, &m.total_bytes));
  return m;
}

int use_device(const std::string& device) {
  const auto colon = device.find(':');
  const int dev = colon == std::string::npos ? 0 : std::stoi(device.substr(colon + 1));
  DLB_CUDA_CHECK(cudaSetDevice(dev));
  return dev;
}

bool device_available(std::string* reason) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (reason) *reason = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
    cudaGetLastError();
    return false;
  }
  if (n == 0) {
    if (reason) *reason = "the driver reports 0 CUDA devices";
    return false;
  }
  return true;
}

PinnedBuffer::PinnedBuffer(std::size_t bytes, bool write_combined, const std::string& what) : wc_(write_combined) {
  ensure(bytes, what);
}

void PinnedBuffer::ensure(std::size_t bytes, const std::string& what) {
  if (bytes <= bytes_ && p_) return;
  release();
  const cudaError_t e = cudaHostAlloc(&p_, std::max<std::size_t>(bytes, 1), wc_ ? cudaHostAllocWriteCombined : cudaHostAllocDefault);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: clear it so the next call does not report it
    p_ = nullptr;
    if (e == cudaErrorMemoryAllocation) throw OutOfMemory("host: cudaHostAlloc of " + std::to_string(bytes) + " bytes for " + what);
    throw_cuda_error(e, "cudaHostAlloc", __FILE__, __LINE__);
  }
  bytes_ = bytes;
}

void PinnedBuffer::release() noexcept {
  if (p_) cudaFreeHost(p_);
  p_ = nullptr, bytes_ = 0;
}

void refuse_inside_capture(cudaStream_t s, const std::string& why) {
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  DLB_CUDA_CHECK(cudaStreamIsCapturing(s, &cap));
  if (cap != cudaStreamCaptureStatusNone) throw std::runtime_error(why);
}

Stream::Stream() { DLB_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
Stream::~Stream() {
  if (!s_) return;
  release_stream_scratch(s_);  // its cuBLAS workspace, gemm_f32's operand copies (stream_scratch.h)
  cudaStreamDestroy(s_);
}

Event::Event(bool timing) { DLB_CUDA_CHECK(cudaEventCreateWithFlags(&e_, timing ? cudaEventDefault : cudaEventDisableTiming)); }
Event::~Event() {
  if (e_) cudaEventDestroy(e_);
}

double elapsed_seconds(cudaEvent_t a, cudaEvent_t b) {
  DLB_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  DLB_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  return ms * 1e-3;
}

void EventTimer::start(cudaStream_t s) { DLB_CUDA_CHECK(cudaEventRecord(a_, s)); }
double EventTimer::stop_seconds(cudaStream_t s) {
  DLB_CUDA_CHECK(cudaEventRecord(b_, s));
  return elapsed_seconds(a_, b_);
}

}  // namespace dlb::cuda
