// Dropout with a Philox mask (see dropout.h). The fast version draws the 16 blocks of a 64-element
// group side by side in vector lanes (V::ivec, vpmuludq for the 32x32->64 multiplies); the element
// map (philox.h: philox_element) makes each word vector 16 consecutive elements, so no shuffles.
// Before (GCC vectorizing a block at a time, AoS words): 2 ns an element, 9% of a transformer step.
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
    mask[i] = philox_uniform(philox_element(seed, e)) < p ? 0 : 1;
  }
}

}  // namespace dlb::cpu::seq

#define DLB_ISA_INCLUDE "kernels/cpu/seq/dropout.cpp"
#include "kernels/cpu/seq/foreach_isa.h"

namespace dlb::cpu::seq {
namespace {
// Elements split at group boundaries past `offset` (kPhiloxGroup), so that a task owns whole groups;
// relu: x's negatives (and NaNs) read as 0 (relu_dropout_forward).
void dropout_run(const float* x, float* y, std::uint8_t* mask, std::size_t n, float p, std::uint64_t seed,
                 std::uint64_t offset, bool relu = false) {
  const float scale = p < 1.f ? 1.f / (1.f - p) : 0.f;
  const auto body = DLB_ISA_PICK(dropout_range);
  constexpr std::uint64_t G = kPhiloxGroup;
  const std::uint64_t first = offset / G, end = (offset + n + G - 1) / G;
  parallel_rows(long(end - first), G * 3, [&](long lo, long hi) {
    const std::uint64_t e0 = std::max(offset, (first + lo) * G), e1 = std::min(offset + n, (first + hi) * G);
    const std::size_t i0 = e0 - offset;
    body(x + i0, y + i0, mask ? mask + i0 : nullptr, e1 - e0, p, scale, seed, e0, relu);
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

void relu_dropout_forward(const float* x, float* y, std::size_t n, float p, std::uint64_t seed, std::uint64_t offset) {
  dropout_run(x, y, nullptr, n, p, seed, offset, true);
}

void relu_dropout_backward(const float* y, const float* dy, float* dx, std::size_t n, float scale) {
  const auto body = DLB_ISA_PICK(relu_dropout_backward_range);
  parallel_rows(long(n), 3, [&](long lo, long hi) { body(y + lo, dy + lo, dx + lo, std::size_t(hi - lo), scale); });
}

}  // namespace dlb::cpu::seq

#else  // ---- bodies, once per ISA (foreach_isa.h) ----

// n elements from stream element e0 on: y = keep ? x * scale : 0 (relu: keep ? relu(x) * scale : 0).
void dropout_range(const float* x, float* y, std::uint8_t* mask, std::size_t n, float p, float scale,
                   std::uint64_t seed, std::uint64_t e0, bool relu) {
  constexpr std::uint64_t G = kPhiloxGroup;
  std::size_t i = 0;
  auto one = [&](std::size_t k) {  // element k alone (a partial group)
    const bool keep = !(philox_uniform(philox_element(seed, e0 + k)) < p);
    const float v = relu && !(x[k] > 0.f) ? 0.f : x[k];
    y[k] = keep ? v * scale : 0.f;
    if (mask) mask[k] = keep;
  };
  for (; i < n && (e0 + i) % G; ++i) one(i);  // the head
  const vec vp = V::set1(p), vs = V::set1(scale), zero = V::zero();
  for (; n - i >= G; i += G) {  // whole groups: 16 blocks, V::L at a time
    const std::uint64_t b0 = (e0 + i) / G * 16;
    for (int j = 0; j < 16; j += V::L) {
      using I = V::ivec;
      I c0 = V::iota(std::uint32_t(b0) + std::uint32_t(j)), c1 = V::iset1(std::uint32_t(b0 >> 32));
      I c2 = V::iset1(0), c3 = V::iset1(0), h0, l0, h1, l1;
      std::uint32_t k0 = std::uint32_t(seed), k1 = std::uint32_t(seed >> 32);
      for (int r = 0; r < 10; ++r) {  // philox4x32_10, lane-wise
        if (r) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
        V::mulhilo(c0, 0xD2511F53u, h0, l0);
        V::mulhilo(c2, 0xCD9E8D57u, h1, l1);
        c0 = V::ixor(V::ixor(h1, c1), V::iset1(k0)), c2 = V::ixor(V::ixor(h0, c3), V::iset1(k1));
        c1 = l1, c3 = l0;
      }
      const I w[4] = {c0, c1, c2, c3};
      for (int k = 0; k < 4; ++k) {  // word k: elements 16 k + j .. + V::L of the group
        const std::size_t at = i + 16 * std::size_t(k) + std::size_t(j);
        const vec u = V::uniform(w[k]);
        vec v = V::load(x + at);
        if (relu) v = V::select(V::lt(zero, v), v, zero);
        V::store(y + at, V::select(V::lt(u, vp), zero, V::mul(v, vs)));
        if (mask) {
          float uu[V::L];
          V::store(uu, u);
          for (int l = 0; l < V::L; ++l) mask[at + std::size_t(l)] = !(uu[l] < p);
        }
      }
    }
  }
  for (; i < n; ++i) one(i);  // the tail
}

// dx = y > 0 ? dy * scale : 0 over n elements (whole vectors, then a masked tail).
void relu_dropout_backward_range(const float* y, const float* dy, float* dx, std::size_t n, float scale) {
  const vec vs = V::set1(scale), zero = V::zero();
  std::size_t i = 0;
  for (; i + V::L <= n; i += V::L)
    V::store(dx + i, V::select(V::lt(zero, V::load(y + i)), V::mul(V::load(dy + i), vs), zero));
  if (const int m = int(n - i))
    V::store_n(dx + i, V::select(V::lt(zero, V::load_n(y + i, m, 0.f)), V::mul(V::load_n(dy + i, m, 0.f), vs), zero), m);
}

#endif
