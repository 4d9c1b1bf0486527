// Host buffers, page-locked through kernels/cuda/cuda_util.h's PinnedBuffer where a device is usable
// (see pinned.h). In a build without CUDA, or on a machine without a usable device, they are plain
// aligned memory.
#include "models/loader/pinned.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "kernels/common/device.h"
#include "kernels/common/errors.h"

#ifdef DLB_HAVE_CUDA
#include "kernels/cuda/cuda_util.h"
#endif

namespace dlb::models::loader {

namespace {
bool can_pin() {
#ifdef DLB_HAVE_CUDA
  return cuda_info().available;
#else
  return false;
#endif
}
}  // namespace

std::string pinned_memory_kind() {
  if (can_pin()) return "page-locked (cudaHostAlloc)";
  const auto& info = cuda_info();
  return "plain memory (" + (info.reason.empty() ? std::string("no usable CUDA device") : info.reason) + ")";
}

HostBuffer::HostBuffer(std::size_t bytes, bool want_pinned) {
  const std::size_t n = (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64;
#ifdef DLB_HAVE_CUDA
  if (want_pinned && can_pin()) {
    auto* b = new cuda::PinnedBuffer(n, false, "a pinned batch");
    p_ = b->data();
    pinned_ = b;
    return;
  }
#else
  (void)want_pinned;
#endif
  p_ = std::aligned_alloc(64, n);
  if (!p_) throw OutOfMemory(std::to_string(n) + " bytes for a batch buffer");
}

HostBuffer::~HostBuffer() {
#ifdef DLB_HAVE_CUDA
  if (pinned_) {
    delete static_cast<cuda::PinnedBuffer*>(pinned_);
    return;
  }
#endif
  std::free(p_);
}

HostBuffer::HostBuffer(HostBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), pinned_(std::exchange(o.pinned_, nullptr)) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& o) noexcept {
  std::swap(p_, o.p_);
  std::swap(pinned_, o.pinned_);
  return *this;
}

}  // namespace dlb::models::loader
