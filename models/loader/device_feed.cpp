// Host-to-device copies of the loader's batches (see device_feed.h), through kernels/cuda/cuda_util.h
// (tracked device buffers, a stream of our own, ordering-only events). A ring of `depth` device slots: a slot's new
// copy waits (on the copy stream) for the work on its old batch, and its old host batch goes back to
// the loader only once that batch's copy has finished. In a build without CUDA the constructor says so.
#include "models/loader/device_feed.h"

#include <chrono>
#include <deque>
#include <memory>
#include <vector>

#include "kernels/common/errors.h"

#ifdef DLB_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_util.h"
#endif

namespace dlb::models::loader {

#ifdef DLB_HAVE_CUDA

struct DeviceFeed::Impl {
  struct Slot {
    cuda::DeviceBuffer<float> x;
    cuda::DeviceBuffer<std::int32_t> labels;
    std::unique_ptr<cuda::Event> copied, consumed;
    BatchLease host;
    DeviceBatch batch;
  };
  Loader& loader;
  cudaStream_t work = nullptr;
  std::unique_ptr<cuda::Stream> copy;
  bool non_blocking = true, ended = false;
  std::vector<Slot> slots;
  std::deque<int> free, queued;
  int handed = -1;
  FeedStats stats;

  Impl(Loader& l, int device, void* stream, bool nb, int depth) : loader(l), work(static_cast<cudaStream_t>(stream)), non_blocking(nb) {
    std::string why;
    if (!cuda::device_available(&why)) throw Unsupported("device feed: no CUDA device (" + why + ")");
    DLB_CUDA_CHECK(cudaSetDevice(device));
    copy = std::make_unique<cuda::Stream>();
    const Source& s = l.source();
    const std::size_t item = std::size_t(s.channels()) * s.height() * s.width(), batch = static_cast<std::size_t>(l.options().batch);
    slots.resize(static_cast<std::size_t>(std::max(depth, 2)));
    for (std::size_t k = 0; k < slots.size(); ++k) {
      slots[k].x = cuda::DeviceBuffer<float>(batch * item);
      slots[k].labels = cuda::DeviceBuffer<std::int32_t>(batch);
      slots[k].copied = std::make_unique<cuda::Event>(false);
      slots[k].consumed = std::make_unique<cuda::Event>(false);
      free.push_back(static_cast<int>(k));
    }
  }
  ~Impl() {
    if (copy) cudaStreamSynchronize(*copy);  // no copy still reading a host batch given back below
    for (auto& s : slots) s.host.reset();
  }

  void issue(int k) {
    Slot& s = slots[static_cast<std::size_t>(k)];
    if (s.host) {  // its old batch: copied long ago (the work waited for it); back to the loader first
      DLB_CUDA_CHECK(cudaEventSynchronize(*s.copied));
      s.host.reset();
    }
    BatchLease b = loader.next();
    if (!b) {
      ended = true;
      free.push_back(k);
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    DLB_CUDA_CHECK(cudaStreamWaitEvent(*copy, *s.consumed, 0));  // the work on the slot's old batch is done
    const std::size_t xb = std::size_t(b->n) * b->c * b->h * b->w * sizeof(float), yb = std::size_t(b->n) * sizeof(std::int32_t);
    DLB_CUDA_CHECK(cudaMemcpyAsync(s.x.data(), b->x, xb, cudaMemcpyHostToDevice, *copy));
    DLB_CUDA_CHECK(cudaMemcpyAsync(s.labels.data(), b->labels, yb, cudaMemcpyHostToDevice, *copy));
    DLB_CUDA_CHECK(cudaEventRecord(*s.copied, *copy));
    if (!non_blocking) DLB_CUDA_CHECK(cudaStreamSynchronize(*copy));
    stats.enqueue_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    stats.bytes += xb + yb;
    stats.batches += 1;
    s.batch = DeviceBatch{b->epoch, b->index, b->n, s.x.data(), s.labels.data(), b->pinned};
    s.host = std::move(b);
    queued.push_back(k);
  }

  const DeviceBatch* next() {
    if (handed >= 0) {  // everything the caller queued on its batch is behind this event
      DLB_CUDA_CHECK(cudaEventRecord(*slots[static_cast<std::size_t>(handed)].consumed, work));
      free.push_back(handed);
      handed = -1;
    }
    while (!ended && !free.empty() && queued.size() < slots.size() - 1) {
      const int k = free.front();
      free.pop_front();
      issue(k);
    }
    if (queued.empty()) {  // the epoch is over
      ended = false;
      return nullptr;
    }
    handed = queued.front();
    queued.pop_front();
    Slot& s = slots[static_cast<std::size_t>(handed)];
    DLB_CUDA_CHECK(cudaStreamWaitEvent(work, *s.copied, 0));
    while (!ended && !free.empty()) {  // the next copy starts now, behind the work just handed out
      const int k = free.front();
      free.pop_front();
      issue(k);
    }
    return &s.batch;
  }
};

DeviceFeed::DeviceFeed(Loader& loader, int device, void* stream, bool non_blocking, int depth)
    : impl_(std::make_unique<Impl>(loader, device, stream, non_blocking, depth)) {}
DeviceFeed::~DeviceFeed() = default;
const DeviceBatch* DeviceFeed::next() { return impl_->next(); }
FeedStats DeviceFeed::stats() const { return impl_->stats; }

#else

struct DeviceFeed::Impl {};
DeviceFeed::DeviceFeed(Loader&, int, void*, bool, int) {
  throw Unsupported("device feed: dlbench was built without CUDA (nvcc was not found at configure time)");
}
DeviceFeed::~DeviceFeed() = default;
const DeviceBatch* DeviceFeed::next() { return nullptr; }
FeedStats DeviceFeed::stats() const { return {}; }

#endif

}  // namespace dlb::models::loader
