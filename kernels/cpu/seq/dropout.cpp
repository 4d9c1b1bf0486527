// Dropout with a Philox mask (see dropout.h). The fast version draws one Philox block per 4
// elements; GCC vectorizes the block loop at the target of each ISA pass (32x32->64 multiplies).
#ifndef DLB_ISA_PASS
#include "kernels/cpu/seq/dropout.h"

#include <algorithm>

#include "kernels/common/philox.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/seq/parallel.h"
#include "kernels/cpu/simd.h"

namespace dlb::cpu::seq {

void dropout_mask_ref(std::uint8_t* mask, std::size_t n, float p, std::uint64_t seed, std::uint64_t offset) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t e = offset + i;
    mask[i] = philox_uniform(philox_block(seed, e / 4).v[e % 4]) < p ? 0 : 1;
  }
}

}  // namespace dlb::cpu::seq

#define DLB_ISA_INCLUDE "kernels/cpu/seq/dropout.cpp"
#include "kernels/cpu/seq/foreach_isa.h"

namespace dlb::cpu::seq {
namespace {
// Elements split at multiples of 4 past `offset`, so that a task owns whole Philox blocks.
void dropout_run(const float* x, float* y, std::uint8_t* mask, std::size_t n, float p, std::uint64_t seed,
                 std::uint64_t offset) {
  const float scale = p < 1.f ? 1.f / (1.f - p) : 0.f;
  const auto body = DLB_ISA_PICK(dropout_range);
  const std::uint64_t first_block = offset / 4, end_block = (offset + n + 3) / 4;
  parallel_rows(long(end_block - first_block), 4 * 3, [&](long lo, long hi) {
    const std::uint64_t e0 = std::max(offset, (first_block + lo) * 4),
                        e1 = std::min(offset + n, (first_block + hi) * 4);
    const std::size_t i0 = e0 - offset;
    body(x + i0, y + i0, mask ? mask + i0 : nullptr, e1 - e0, p, scale, seed, e0);
  });
}
}  // namespace

void dropout_forward(const float* x, float* y, std::uint8_t* mask, std::size_t n, float p, std::uint64_t seed,
                     std::uint64_t offset) {
  dropout_run(x, y, mask, n, p, seed, offset);
}

void dropout_backward(const float* dy, float* dx, std::size_t n, float p, std::uint64_t seed, std::uint64_t offset) {
  dropout_run(dy, dx, nullptr, n, p, seed, offset);
}

}  // namespace dlb::cpu::seq

#else  // ---- bodies, once per ISA (foreach_isa.h) ----

// n elements from stream element e0 on: y = keep ? x * scale : 0.
void dropout_range(const float* x, float* y, std::uint8_t* mask, std::size_t n, float p, float scale,
                   std::uint64_t seed, std::uint64_t e0) {
  std::size_t i = 0;
  auto put = [&](std::uint32_t w) {  // element i from its Philox word
    const bool keep = !(philox_uniform(w) < p);
    y[i] = keep ? x[i] * scale : 0.f;
    if (mask) mask[i] = keep;
    ++i;
  };
  for (; i < n && (e0 + i) % 4; ) put(philox_block(seed, (e0 + i) / 4).v[(e0 + i) % 4]);  // the head
  constexpr int kBatch = 64;  // blocks drawn in one vectorizable loop
  std::uint32_t w[4 * kBatch];
  while (n - i >= 4) {
    const int nb = int(std::min<std::size_t>(kBatch, (n - i) / 4));
    const std::uint64_t b0 = (e0 + i) / 4;
    for (int b = 0; b < nb; ++b) {
      const Philox4 r = philox_block(seed, b0 + b);
      for (int k = 0; k < 4; ++k) w[4 * b + k] = r.v[k];
    }
    for (int k = 0; k < 4 * nb; ++k) put(w[k]);
  }
  if (i < n) {  // the tail
    const Philox4 r = philox_block(seed, (e0 + i) / 4);
    for (int k = 0; i < n; ++k) put(r.v[k]);
  }
}

#endif
