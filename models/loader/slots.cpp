// The shared batch slots (see slots.h).
#include "models/loader/slots.h"

#include <sys/mman.h>

#include "kernels/common/errors.h"

namespace dlb::models::loader {

namespace {
constexpr std::size_t up64(std::size_t n) { return (n + 63) / 64 * 64; }
constexpr std::size_t kMaxBytes = std::size_t(16) << 30;
}  // namespace

SlotArena::SlotArena(int slots, std::size_t batch, std::size_t item) : slots_(slots), batch_(batch), item_(item) {
  labels_at_ = up64(sizeof(BatchHeader));
  indices_at_ = labels_at_ + up64(batch * sizeof(std::int32_t));
  x_at_ = indices_at_ + up64(batch * sizeof(std::uint32_t));
  stride_ = up64(x_at_ + batch * item * sizeof(float));
  if (slots <= 0 || batch == 0 || stride_ > kMaxBytes / static_cast<std::size_t>(slots))
    throw OutOfMemory(std::to_string(slots) + " batch slots of " + std::to_string(stride_ >> 20) + " MiB (over 16 GiB)");
  bytes_ = stride_ * static_cast<std::size_t>(slots);
  void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw OutOfMemory("shared batch slots of " + std::to_string(bytes_ >> 20) + " MiB");
  base_ = static_cast<unsigned char*>(p);
}

SlotArena::~SlotArena() {
  if (base_) ::munmap(base_, bytes_);
}

SlotView SlotArena::slot(int k) const {
  unsigned char* s = base_ + stride_ * static_cast<std::size_t>(k);
  return SlotView{reinterpret_cast<BatchHeader*>(s), reinterpret_cast<std::int32_t*>(s + labels_at_),
                  reinterpret_cast<std::uint32_t*>(s + indices_at_), reinterpret_cast<float*>(s + x_at_)};
}

}  // namespace dlb::models::loader
