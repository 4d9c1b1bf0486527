// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11; cuRAND's
// CURAND_RNG_PSEUDO_PHILOX4_32_10 and Random123's philox4x32): a counter-based generator, so any
// element's random number is a pure function of (seed, its index). The CPU and GPU dropout kernels
// draw from it by element index and therefore drop the same elements, checked against each other.
// Header-only, host and device.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define DLB_HD __host__ __device__ __forceinline__
#else
#define DLB_HD inline
#endif

namespace dlb {

struct Philox4 {
  std::uint32_t v[4];
};

// 10 rounds of Philox4x32 on counter c with key k.
DLB_HD Philox4 philox4x32_10(Philox4 c, std::uint32_t k0, std::uint32_t k1) {
  for (int r = 0; r < 10; ++r) {
    if (r) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;  // the Weyl key schedule
    const std::uint64_t p0 = std::uint64_t(0xD2511F53u) * c.v[0], p1 = std::uint64_t(0xCD9E8D57u) * c.v[2];
    c = Philox4{{std::uint32_t(p1 >> 32) ^ c.v[1] ^ k0, std::uint32_t(p1), std::uint32_t(p0 >> 32) ^ c.v[3] ^ k1,
                 std::uint32_t(p0)}};
  }
  return c;
}

// The 4 words for elements 4*block .. 4*block+3 of stream `seed`: counter {block lo, block hi, 0, 0},
// key {seed lo, seed hi}.
DLB_HD Philox4 philox_block(std::uint64_t seed, std::uint64_t block) {
  return philox4x32_10(Philox4{{std::uint32_t(block), std::uint32_t(block >> 32), 0u, 0u}}, std::uint32_t(seed),
                       std::uint32_t(seed >> 32));
}

// Dropout's element -> word map: element e of a stream is word k of block b with
//   e = 64 g + 16 k + j,  b = 16 g + j   (g = e / 64, k = (e % 64) / 16, j = e % 16):
// the 64 elements of group g take the 4 words of its 16 blocks word-major, so 16 blocks drawn side by
// side in vector lanes (one zmm of counters) give 4 vectors of 16 consecutive elements without a
// shuffle; on the GPU a thread's 4 words land 16 apart, a half-warp's coalesced.
constexpr int kPhiloxGroup = 64;  // elements a group; its blocks: kPhiloxGroup / 4
DLB_HD std::uint32_t philox_element(std::uint64_t seed, std::uint64_t e) {
  return philox_block(seed, e / 64 * 16 + e % 16).v[(e % 64) / 16];
}

// A word's uniform in [0, 1): its top 24 bits times 2^-24 (exact in fp32, so every backend agrees).
DLB_HD float philox_uniform(std::uint32_t w) { return float(w >> 8) * (1.0f / 16777216.0f); }

}  // namespace dlb
