// The last step of the pipeline: each batch from the loader copied into device memory on a copy
// stream of its own, two (depth) device buffers deep, so batch k+1's copy runs while the step works on
// batch k; the work on a batch waits for its copy on the device (an event), never on the host. With
// non_blocking (PyTorch's .to(device, non_blocking=True)) the host only queues the copy; from pinned
// memory that copy is a DMA the host never waits for, from pageable memory the driver stages it
// through a pinned buffer of its own and returns once staged (why pin_memory matters). Without
// non_blocking the host waits for each copy, as .to(device) does.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "models/loader/loader.h"

namespace dlb::models::loader {

struct DeviceBatch {
  std::int64_t epoch = 0, index = 0;
  int n = 0;
  const float* x = nullptr;            // device memory, n x c x h x w
  const std::int32_t* labels = nullptr;
  bool from_pinned = false;
};

struct FeedStats {
  std::size_t batches = 0, bytes = 0;
  double enqueue_s = 0;  // host time spent issuing the copies (all of the copy when blocking)
};

class DeviceFeed {
 public:
  // `stream` is the cudaStream_t the work runs on (nullptr: the legacy default stream). Throws
  // dlb::Unsupported in a build without CUDA or on a machine without a usable device.
  DeviceFeed(Loader& loader, int device, void* stream, bool non_blocking, int depth = 2);
  ~DeviceFeed();
  DeviceFeed(const DeviceFeed&) = delete;
  DeviceFeed& operator=(const DeviceFeed&) = delete;
  // The next batch, in device memory, ready for work queued on `stream` after this call; null at
  // the epoch's end (the next call begins the next epoch). The batch stays valid until the next call.
  const DeviceBatch* next();
  FeedStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dlb::models::loader
