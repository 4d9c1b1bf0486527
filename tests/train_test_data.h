// Seeded random training data for the trainer tests: n images of the model's input shape, uniform
// in [-1, 1) (or [0, 1] with unit_interval, what the autoencoder's sigmoid output can reconstruct),
// labels i % 10.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common/verify.h"
#include "models/data.h"
#include "models/layers.h"

namespace dlb::test {

inline models::Dataset random_dataset(const models::Shape& in, std::size_t n, std::uint64_t seed,
                                      bool unit_interval = false) {
  models::Dataset d;
  d.name = "random", d.c = in.c(), d.h = in.h(), d.w = in.w(), d.classes = 10;
  d.images.resize(n * in.per_item());
  fill_uniform(d.images.data(), d.images.size(), seed);
  if (unit_interval)
    for (float& v : d.images) v = 0.5f + 0.5f * v;
  for (std::size_t i = 0; i < n; ++i) d.labels.push_back(std::int32_t(i % 10));
  return d;
}

}  // namespace dlb::test
