// Device scratch per (device, stream) (see stream_scratch.h).
#include "kernels/cuda/stream_scratch.h"

#include <map>
#include <mutex>
#include <utility>

#include "kernels/cuda/cuda_util.h"

namespace dlb::cuda {

namespace {
struct Slots {
  void* p[kScratchSlots] = {};
  std::size_t bytes[kScratchSlots] = {};
};
std::mutex g_mu;
std::map<std::pair<int, cudaStream_t>, Slots>& scratch() {
  static std::map<std::pair<int, cudaStream_t>, Slots> m;
  return m;
}
}  // namespace

void* stream_scratch(cudaStream_t stream, ScratchSlot slot, std::size_t bytes, const char* why_not_in_capture) {
  if (bytes == 0) return nullptr;
  int dev = 0;
  DLB_CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(g_mu);
  Slots& s = scratch()[{dev, stream}];
  const int i = static_cast<int>(slot);
  if (bytes <= s.bytes[i]) return s.p[i];
  refuse_inside_capture(stream, why_not_in_capture);
  if (s.p[i]) {
    DLB_CUDA_CHECK(cudaStreamSynchronize(stream));  // no kernel on it still reads the old buffer
    device_free(s.p[i]);
    s.p[i] = nullptr, s.bytes[i] = 0;
  }
  s.p[i] = device_alloc(bytes);
  s.bytes[i] = bytes;
  return s.p[i];
}

void release_stream_scratch(cudaStream_t stream) noexcept {
  std::lock_guard<std::mutex> lock(g_mu);
  auto& m = scratch();
  for (auto it = m.begin(); it != m.end();) {
    if (it->first.second != stream) {
      ++it;
      continue;
    }
    cudaStreamSynchronize(stream);  // its kernels are done with the buffers
    for (void* p : it->second.p) device_free(p);
    it = m.erase(it);
  }
}

}  // namespace dlb::cuda
