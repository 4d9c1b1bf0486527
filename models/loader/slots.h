// Where batches are made: slots in one shared anonymous mapping, taken before any worker is forked,
// so a process worker writes a batch where the loader reads it (PyTorch moves a worker's batch through
// shared memory too); thread workers use the same memory. A slot holds a header, the labels, the
// sample indices and the float CHW images, each 64-byte aligned.
#pragma once
#include <cstddef>
#include <cstdint>

#include "models/loader/source.h"

namespace dlb::models::loader {

struct BatchHeader {
  std::int64_t epoch = 0, index = 0;
  std::int32_t n = 0, pad_ = 0;
  StageTimes times;   // this batch's read, decode, transform, collate
  double cpu_s = 0;   // CPU time of the worker on it
};

struct SlotView {
  BatchHeader* header = nullptr;
  std::int32_t* labels = nullptr;
  std::uint32_t* indices = nullptr;
  float* x = nullptr;
};

class SlotArena {
 public:
  // `slots` slots for batches of up to `batch` samples of `item` floats; OutOfMemory when the
  // mapping cannot be made (or would pass 16 GiB).
  SlotArena(int slots, std::size_t batch, std::size_t item);
  ~SlotArena();
  SlotArena(const SlotArena&) = delete;
  SlotArena& operator=(const SlotArena&) = delete;
  int count() const { return slots_; }
  SlotView slot(int k) const;
  std::size_t x_bytes() const { return batch_ * item_ * sizeof(float); }

 private:
  int slots_;
  std::size_t batch_, item_, stride_ = 0, labels_at_ = 0, indices_at_ = 0, x_at_ = 0, bytes_ = 0;
  unsigned char* base_ = nullptr;
};

}  // namespace dlb::models::loader
