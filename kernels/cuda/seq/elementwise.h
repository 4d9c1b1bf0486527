// The elementwise sequence kernels on the GPU, twins of kernels/cpu/seq/{gelu,dropout,adamw}.h and
// checked against their references: GELU (tanh approximation), dropout drawing the same Philox mask
// as the CPU (kernels/common/philox.h), AdamW; and a broadcast add (the positional encoding). Device
// pointers, enqueued on `s`, fp32 (GELU and dropout also bf16 storage: DType::bf16, fp32 arithmetic,
// one rounding on store).
// Napkin math: memory-bound; GELU 8 / 12 bytes an element (fwd / bwd), dropout 8 (+1 mask),
// AdamW 28 bytes a parameter.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/common/verify.h"  // DType
#include "kernels/cpu/seq/adamw.h"  // AdamW (the hyper-parameters)

namespace dlb::cuda::seq {

void gelu_forward(const void* x, void* y, std::size_t n, DType t, cudaStream_t s);
void gelu_backward(const void* x, const void* dy, void* dx, std::size_t n, DType t, cudaStream_t s);

// As cpu::seq::dropout_forward / _backward: element i of (seed, offset) dropped iff
// philox_uniform(philox_element(seed, offset + i)) < p; mask may be null. offset_add (device, may be
// null): added to offset on the device, a multiple of 64 (a Philox group; models' step offsets,
// step << 40, are): a CUDA graph replays the launch while the trainer moves the value per step.
void dropout_forward(const void* x, void* y, std::uint8_t* mask, std::size_t n, float p, std::uint64_t seed,
                     std::uint64_t offset, DType t, cudaStream_t s, const std::uint64_t* offset_add = nullptr);
void dropout_backward(const void* dy, void* dx, std::size_t n, float p, std::uint64_t seed, std::uint64_t offset,
                      DType t, cudaStream_t s, const std::uint64_t* offset_add = nullptr);
// *p = v on the stream (a dropout offset_add set before a step, outside its graph).
void set_u64(std::uint64_t* p, std::uint64_t v, cudaStream_t s);

// y[i] = x[i] + row[i % period] (fp32): a table added to every item of a batch (the Transformer's
// sinusoidal positional encoding, [T, C] over [B, T, C]). y may alias x.
void add_broadcast(const float* x, const float* row, float* y, std::size_t n, std::size_t period, cudaStream_t s);

// As cpu::seq::adamw_step (the bias corrections from `step` on the host).
void adamw_step(float* p, const float* g, float* m, float* v, std::size_t n, const cpu::seq::AdamW& o, long step,
                cudaStream_t s);
// The same with the step count t read on the device (*step, from 1: a trainer's counter, advanced by
// cuda::increment with the same skip), so a step needs no host sync; nothing is written when skip
// (a device float, may be null) is non-zero: GradScaler's found_inf skips the whole update, the
// decay included, as PyTorch's scaler.step skips optimizer.step().
void adamw_step(float* p, const float* g, float* m, float* v, std::size_t n, const cpu::seq::AdamW& o, const int* step,
                cudaStream_t s, const float* skip = nullptr);

}  // namespace dlb::cuda::seq
