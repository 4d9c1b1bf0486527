// Host buffers for batches that go on to a device, and the pin step that fills them (PyTorch's
// pin_memory thread copies each batch into page-locked memory the same way). Page-locked memory
// (cudaHostAlloc) where a CUDA device is usable; otherwise plain memory, and the loader says so.
#pragma once
#include <cstddef>
#include <string>

namespace dlb::models::loader {

class HostBuffer {
 public:
  HostBuffer() = default;
  // `bytes` of page-locked memory when want_pinned and a CUDA device is usable, else plain
  // (64-byte aligned). OutOfMemory when neither can be had.
  HostBuffer(std::size_t bytes, bool want_pinned);
  ~HostBuffer();
  HostBuffer(HostBuffer&& o) noexcept;
  HostBuffer& operator=(HostBuffer&& o) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  void* data() const { return p_; }
  bool pinned() const { return pinned_ != nullptr; }

 private:
  void* p_ = nullptr;
  void* pinned_ = nullptr;  // the cuda::PinnedBuffer holding p_ (kernels/cuda/cuda_util.h), when page-locked
};

// What pin=on gets here: "page-locked (cudaHostAlloc)", or "plain memory (<why not>)".
std::string pinned_memory_kind();

}  // namespace dlb::models::loader
