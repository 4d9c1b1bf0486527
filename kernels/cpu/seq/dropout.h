// Dropout (nn.Dropout(p), training mode) with a counter-based mask: element i of a call with
// (seed, offset) is dropped iff philox_uniform(philox_element(seed, offset + i)) < p
// (kernels/common/philox.h); kept ones are scaled by 1 / (1 - p). The mask is a pure function of
// (seed, offset + i): backward regenerates it instead of storing it, and the GPU kernels
// (kernels/cuda/seq/) drop exactly the same elements. Callers give each tensor of a step its own
// offset range (or seed). PyTorch's generator differs: parity checks run with p = 0 or pass the mask.
// Napkin math per element: 10 Philox rounds for 4 elements = 5 vpmuludq + ~10 shifts, blends and
// xors, 8 bytes: about as fast as the copy once vectorized (16 blocks a zmm).
#pragma once
#include <cstddef>
#include <cstdint>

namespace dlb::cpu::seq {

// y = mask * x / (1 - p); mask (may be null): 1 kept, 0 dropped. p in [0, 1); p = 1 drops all.
void dropout_forward(const float* x, float* y, std::uint8_t* mask, std::size_t n, float p, std::uint64_t seed,
                     std::uint64_t offset);
// dx = mask * dy / (1 - p), the mask regenerated from (seed, offset). dx may alias dy.
void dropout_backward(const float* dy, float* dx, std::size_t n, float p, std::uint64_t seed, std::uint64_t offset);

// Reference: the mask of elements [offset, offset + n), one Philox call per element.
void dropout_mask_ref(std::uint8_t* mask, std::size_t n, float p, std::uint64_t seed, std::uint64_t offset);

}  // namespace dlb::cpu::seq
