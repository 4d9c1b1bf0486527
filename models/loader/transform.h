// The per-sample transforms of the seeds' CIFAR-10 pipeline, on a sample's 8-bit pixels (planar or
// interleaved, source.h), written as float CHW into its place in the batch: ToTensor (x / 255),
// Normalize ((x - mean) / std per channel), optionally first RandomCrop(size, padding=4) with zero
// fill and RandomHorizontalFlip(p=0.5), the usual CIFAR augmentation. The random draws are a function
// of (seed, epoch, sample index), so a sample's result never depends on which worker made it.
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "models/loader/source.h"

namespace dlb::models::loader {

enum class Augment { none, crop_flip };
Augment parse_augment(const std::string& s);  // UsageError on anything else
const char* augment_name(Augment a);

struct TransformSpec {
  Augment augment = Augment::none;
  int pad = 4;  // RandomCrop's padding
  std::array<float, 3> mean{0.5f, 0.5f, 0.5f}, std{0.5f, 0.5f, 0.5f};
};

// One sample's draws: the crop's top-left corner in the padded image (0..2*pad) and the flip.
struct Draw {
  int oy = 0, ox = 0;
  bool flip = false;
};
Draw draw_for(const TransformSpec& t, std::uint64_t seed, std::uint64_t epoch, std::uint64_t index);

// The reference: torchvision's operations one element at a time, in its float operations
// (float(x) / 255, then (v - mean) / std).
void transform_reference(const SampleView& s, const TransformSpec& t, const Draw& d, float* out);

// The loader's transform: the same floats from a 256-entry table per channel (3 KB, in L1), rows
// copied with the crop's offset and the flip folded into the source index. Bit for bit the reference.
class Transform {
 public:
  explicit Transform(const TransformSpec& t);
  void operator()(const SampleView& s, const Draw& d, float* out) const;
  const TransformSpec& spec() const { return t_; }

 private:
  TransformSpec t_;
  float table_[3][256];
};

}  // namespace dlb::models::loader
