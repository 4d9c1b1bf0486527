// The CPU step kinds (models/plan.h StepKind): what each computes forward and backward, on the
// kernels of kernels/cpu/conv2d (its dispatch table picks the algorithm), nn_ops, bf16_gemm and
// onednn. step_forward / step_backward dispatch on the kind for the executor; each kind's body is a
// named function below, which the tests call to hold one kind against another.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/cpu/bf16_gemm.h"
#include "models/layers.h"
#include "models/plan.h"

namespace dlb::models {

// A step's scratch, kept from its forward to its backward and across steps.
struct StepScratch {
  std::vector<std::int32_t> arg;   // a fused pool's argmax (as maxpool2d_relu_forward writes it)
  std::vector<std::uint16_t> y16;  // bf16 nChw16c: a conv's output, then its dy; or a hand-on output
  std::vector<float> dy;           // a conv's dense dy behind a fused pool (conv_bf16_relu_pool, dense)
  std::vector<float> dw;           // a weight then bias gradient, before it is added into Param::grad
  cpu::Bf16Scratch b16;            // linear_bf16's / lm_head_bf16's operands cast to bf16 (x and W from
                                   // the forward, read again by the backward)
};

// What one step sees: its layers (the plan's nodes, in order), its inputs, its output; backward
// adds dy and where each input's gradient goes (null: not wanted).
struct StepArgs {
  Layer* const* layers;
  Shapes in;
  const void* const* xs;
  float* y;
  const float* dy = nullptr;
  float* const* dxs = nullptr;
  const std::uint16_t* x16 = nullptr;  // conv_bf16_relu_pool: x as bf16 nChw16c (Step::hand_from)
  std::uint16_t* y16 = nullptr;        // conv_relu_pool_bf16: y again as bf16 nChw16c (Step::hand_on)
  const float* x(int k = 0) const { return static_cast<const float*>(xs[k]); }
  float* dx(int k = 0) const { return dxs ? dxs[k] : nullptr; }
};

void step_forward(const Step& s, const StepArgs& a, StepScratch& sc);
void step_backward(const Step& s, const StepArgs& a, StepScratch& sc);

// ---- the bodies (in: the first layer's input shape; pool k from the MaxPool2d) ----
// relu_pool: y = relu(maxpool_k(x)) in one pass (the ReLU's output is never written); backward
// writes dx (w.r.t. the ReLU's input) from dy, y and the argmax.
void relu_pool_forward(int k, const Shape& in, const float* x, float* y, StepScratch& sc);
void relu_pool_backward(int k, const Shape& in, const float* y, const float* dy, float* dx, const StepScratch& sc);
// relu_dropout: y = dropout(relu(x)) in one pass (the ReLU's output is never written), the dropout's
// own mask (its stream and step); backward writes dx (w.r.t. the ReLU's input) from y and dy alone.
void relu_dropout_forward(const Dropout& d, const Shape& in, const float* x, float* y);
void relu_dropout_backward(const Dropout& d, const Shape& in, const float* y, const float* dy, float* dx);
// conv_relu_pool: a first conv, ReLU and pool per image (cpu::conv2d_forward_relu_pool); backward adds
// the conv's dW, db from the pool's dy (no input gradient).
void conv_relu_pool_forward(Conv2d& c, int k, const Shape& in, const float* x, float* y, StepScratch& sc);
void conv_relu_pool_backward(Conv2d& c, int k, const Shape& in, const float* x, const float* y, const float* dy,
                             StepScratch& sc);
// conv_sparse_dy (bf16: conv_sparse_dy_bf16): both gradients over dy's nonzeros where the kernel
// takes dy (at most 30% nonzero), else the dense backward (Conv2d::backward / conv_backward_bf16).
void conv_sparse_dy_backward(Conv2d& c, const Bwd<float>& b, bool bf16, StepScratch& sc);
// bf16 compute on fp32 arrays whose values autocast made bf16-exact (oneDNN converts them in its
// reorders): conv y and dx come back rounded to bf16 (rounds_output / rounds_dx), ConvTranspose2d's
// and Linear's y and dx in fp32.
void conv_forward_bf16(Conv2d& c, const Shape& in, const float* x, float* y);
void conv_backward_bf16(Conv2d& c, const Shape& in, const float* x, const float* dy, float* dx, StepScratch& sc);
void conv_transpose_forward_bf16(ConvTranspose2d& t, const Shape& in, const float* x, float* y);
void conv_transpose_backward_bf16(ConvTranspose2d& t, const Shape& in, const float* x, const float* dy, float* dx,
                                  StepScratch& sc);
void linear_forward_bf16(Linear& l, const Shape& in, const float* x, float* y, StepScratch& sc);
void linear_backward_bf16(Linear& l, const Shape& in, const float* x, const float* dy, float* dx, StepScratch& sc);
// lm_head_bf16: TiedLMHead's three products on bf16 operands (a Linear without bias whose weight is
// wte's first V rows); wte.grad[:V] += dy^T x, y and dx in fp32. Both kinds' backward reads x and W
// as their forward cast them into sc.b16 (it must follow its own forward, as the executor runs them).
void lm_head_forward_bf16(TiedLMHead& h, const Shape& in, const float* x, float* y, StepScratch& sc);
void lm_head_backward_bf16(TiedLMHead& h, const Shape& in, const float* x, const float* dy, float* dx, StepScratch& sc);
// conv_relu_pool_bf16: the first layer fused in bf16 (cpu::conv2d_forward_relu_pool_bf16), y16 its
// output again as bf16 nChw16c (or null); backward: dW, db over the pool's winners in bf16.
void conv_relu_pool_forward_bf16(Conv2d& c, int k, const Shape& in, const float* x, float* y, std::uint16_t* y16,
                                 StepScratch& sc);
void conv_relu_pool_backward_bf16(Conv2d& c, int k, const Shape& in, const float* x, const float* y, const float* dy,
                                  StepScratch& sc);
// conv_bf16_relu_pool: oneDNN's conv writes bf16 nChw16c (from x, or from x16 in that layout too),
// the 2x2 pool + ReLU reads it there; backward as the step's PoolConvBackward says.
void conv_bf16_relu_pool_forward(Conv2d& c, const Shape& in, const float* x, const std::uint16_t* x16, float* y,
                                 StepScratch& sc);
void conv_bf16_relu_pool_backward(Conv2d& c, int k, const Shape& in, const float* x, const float* y, const float* dy,
                                  float* dx, PoolConvBackward how, bool sparse_dy, StepScratch& sc);

}  // namespace dlb::models
