// How far a training step whose GEMMs alone are autocast (fp32 buffers, operands rounded to tf32,
// bf16 or fp16, fp32 accumulation: the CUDA sequence trainer's tf32 / bf16 / fp16) may be from the
// fp32 step from the same weights on the same batch: the amp and gpt2 suites' GPU checks and the
// trainer's tests.
#pragma once
#include "kernels/common/verify.h"

namespace dlb {

// Napkin math, u = one ulp of the operand's mantissa (tf32 10 bits: 2^-10, Hopper truncates; bf16 7
// bits: 2^-7, truncation included): a product of two rounded operands is off by <= 2u, the K
// products' errors differ in sign, so a GEMM's output is off by ~u..2u relative L2; a gradient tensor
// comes out of a chain of ~2L GEMMs (forward and back, L layers), errors adding in quadrature:
// 2u sqrt(2L) ~ 10u at L 12. Gradient: 32u per tensor as relative L2 (tf32 3.1e-2; bf16 0.25,
// kHalfGradientL2Tolerance: a wrong or lost term is off by 0.3 and more); the loss (a mean of
// log-softmax over logits off by ~2u): 4u relative (tf32 3.9e-3, bf16 3.1e-2). Per tensor as L2, not
// the largest element's error: a GEMM sum that cancels carries its terms' rounding, not its own
// scale's. fp16 (10-bit mantissa, round to nearest: u = 2^-11): the same 4u / 32u (loss 2.0e-3,
// gradient 1.6e-2), which holds while the loss scale keeps the scaled gradients in fp16's normal
// range (2^-14..65504): the scaler's 2^16 lifts gradients of 1e-6..1e-8 to 2^-4..2^-11; a gradient
// past 65504 is an inf that the scaler turns into a skipped step and a halved scale, so overflow
// shows as skipped steps, never as error here; one still below 2^-14 after scaling loses bits
// (subnormal), below 2^-24 it flushes to zero, and then the error passes 32u.
// fp32: {3e-5, 1e-4} (summation orders only, as the GPU trainers' fp32 tests).
struct StepTolerance {
  double loss, grad_l2;
};
inline StepTolerance autocast_step_tolerance(DType t) {
  switch (t) {
    case DType::tf32: return {4 * 0x1p-10, 32 * 0x1p-10};
    case DType::bf16: return {4 * 0x1p-7, 32 * 0x1p-7};
    case DType::fp16: return {4 * 0x1p-11, 32 * 0x1p-11};
    default: return {3e-5, 1e-4};  // fp32
  }
}

}  // namespace dlb
