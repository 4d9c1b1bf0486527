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

// ReLU then dropout in one pass (a Transformer's feed-forward: linear1 -> relu -> dropout), the ReLU's
// output never written: y = mask ? relu(x) / (1 - p) : 0, relu as kernels/cpu/nn_ops.h's (NaN -> 0),
// the mask exactly dropout_forward's for (seed, offset).
void relu_dropout_forward(const float* x, float* y, std::size_t n, float p, std::uint64_t seed, std::uint64_t offset);
// Its backward from y alone, no mask regenerated: y > 0 iff the element was kept and x > 0, so
// dx = y > 0 ? dy * scale : 0 with scale = 1 / (1 - p) (1 when the dropout is off). dx may alias dy.
// Napkin math: 3 floats moved per element and no Philox, against 2 + 3 for dropout_backward then
// relu_backward (and relu_forward's 2 + dropout_forward's 2 against 2 forward).
void relu_dropout_backward(const float* y, const float* dy, float* dx, std::size_t n, float scale);

// Reference: the mask of elements [offset, offset + n), one Philox call per element.
void dropout_mask_ref(std::uint8_t* mask, std::size_t n, float p, std::uint64_t seed, std::uint64_t offset);

}  // namespace dlb::cpu::seq
