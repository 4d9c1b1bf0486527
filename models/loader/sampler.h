// The order an epoch visits a dataset in: a seeded permutation (PyTorch's RandomSampler, with its own
// generator) or the identity, cut into batches (the last one partial unless drop_last).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dlb::models::loader {

// Epoch `epoch`'s order over [0, n): a Fisher-Yates shuffle driven by SplitMix64 seeded from
// (seed, epoch), the same on every worker and in every process; [0, n) when !shuffle.
std::vector<std::uint32_t> epoch_order(std::size_t n, std::uint64_t seed, std::uint64_t epoch, bool shuffle);

// Batches per epoch, and batch b's first position and size in the order.
std::size_t batch_count(std::size_t n, std::size_t batch, bool drop_last);
inline std::size_t batch_first(std::size_t b, std::size_t batch) { return b * batch; }
inline std::size_t batch_size_of(std::size_t b, std::size_t n, std::size_t batch) {
  return b * batch + batch <= n ? batch : n - b * batch;
}

}  // namespace dlb::models::loader
