// The seeded epoch order (see sampler.h).
#include "models/loader/sampler.h"

#include <numeric>
#include <utility>

namespace dlb::models::loader {

std::vector<std::uint32_t> epoch_order(std::size_t n, std::uint64_t seed, std::uint64_t epoch, bool shuffle) {
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  if (!shuffle || n < 2) return order;
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ull ^ (epoch + 1) * 0xD1B54A32D192ED03ull;
  auto next = [&s] {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  for (std::size_t i = n - 1; i > 0; --i) {
    // multiply-shift to [0, i]: bias below 2^-32 for n < 2^32, irrelevant for an order
    const std::size_t j = static_cast<std::size_t>((static_cast<unsigned __int128>(next()) * (i + 1)) >> 64);
    std::swap(order[i], order[j]);
  }
  return order;
}

std::size_t batch_count(std::size_t n, std::size_t batch, bool drop_last) {
  if (batch == 0) return 0;
  return drop_last ? n / batch : (n + batch - 1) / batch;
}

}  // namespace dlb::models::loader
