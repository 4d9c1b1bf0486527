// Layers with forward and backward for the CPU, each with an fp64 reference path used by the
// gradient checks and by the verification of every training case. Activations are NCHW; a Linear
// layer sees [n, features] as NCHW with h = w = 1. Parameters keep PyTorch's shapes and layouts.
//
// Gradient semantics follow PyTorch: backward ADDS into Param::grad (zero_grad clears it), and the
// reference path adds into Param::ref_grad. The reference reads Param::ref_value (fp64), which
// Sequential::sync_ref() fills from the fp32 values.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/conv2d/conv2d.h"

namespace dlb::models {

// bf16 compute for the CPU AMP step (models/amp.h): while a Bf16Compute(true) lives on this thread,
// Conv2d, ConvTranspose2d and Linear run their GEMMs/convolutions on bf16 operands with fp32 accumulation and fp32
// outputs (oneDNN, kernels/cpu/onednn/) instead of fp32 arithmetic. Callers pass values that are
// already bf16-exact (the AMP step rounds them); Linear casts them to 16-bit buffers, the
// convolutions let oneDNN convert them in its layout reorders and get bf16-rounded y/dx back. Only where
// bf16_compute_native() (oneDNN built, CPU with avx512_bf16, DLB_CPU_ISA allowing it).
class Bf16Compute {
 public:
  explicit Bf16Compute(bool on);
  ~Bf16Compute();
  Bf16Compute(const Bf16Compute&) = delete;
  Bf16Compute& operator=(const Bf16Compute&) = delete;

 private:
  bool prev_;
};
bool bf16_compute_native();
bool bf16_compute_active();  // on this thread, now

struct Shape {
  int n = 1, c = 1, h = 1, w = 1;
  std::size_t size() const { return std::size_t(n) * c * h * w; }
  std::size_t per_item() const { return std::size_t(c) * h * w; }
  std::string str() const;  // "64x3x32x32"
  bool operator==(const Shape& o) const { return n == o.n && c == o.c && h == o.h && w == o.w; }
};

struct Param {
  std::string name;        // "conv1.weight"
  std::vector<int> shape;  // PyTorch's shape
  std::vector<float> value, grad;
  std::vector<double> ref_value, ref_grad;
  std::size_t size() const { return value.size(); }
  void resize(std::vector<int> s);
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string kind() const = 0;  // "Conv2d", "ReLU", ...
  virtual Shape out_shape(const Shape& in) const = 0;  // throws InputError when `in` does not fit
  virtual std::vector<Param*> params() { return {}; }
  // A copy of this layer: its parameters (values, gradients) and configuration; its scratch may be
  // copied or left empty (a copy may not share any buffer with this one).
  virtual std::unique_ptr<Layer> clone() const = 0;
  // Seeded PyTorch default init; layers without parameters ignore it.
  virtual void init(std::uint64_t seed) { (void)seed; }
  // Fast fp32 path. `y` has out_shape(in).size() floats.
  virtual void forward(const Shape& in, const float* x, float* y) = 0;
  // dx may be null when the input gradient is not needed (the first layer).
  virtual void backward(const Shape& in, const float* x, const float* y, const float* dy, float* dx) = 0;
  // fp64 reference path (direct loops).
  virtual void forward_ref(const Shape& in, const double* x, double* y) = 0;
  virtual void backward_ref(const Shape& in, const double* x, const double* y, const double* dy, double* dx) = 0;
  // Multiply-adds of forward for one batch, x2 = flops (napkin math for GFLOP/s).
  virtual double forward_flops(const Shape& in) const { (void)in; return 0; }
  // True when forward(), under an active Bf16Compute, returns outputs already rounded to bf16 (the
  // AMP step then skips its own rounding pass over them).
  virtual bool bf16_output_rounded() const { return false; }
  // The same for the dx of backward() (and of Conv2d's other bf16 backwards).
  virtual bool bf16_dx_rounded() const { return false; }
};

class MaxPool2d;

// nn.Conv2d(in, out, k, stride, padding) with bias.
class Conv2d final : public Layer {
 public:
  Conv2d(std::string name, int in_c, int out_c, int k, int stride = 1, int pad = 0);
  std::string kind() const override { return "Conv2d"; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<Conv2d>(*this); }
  Shape out_shape(const Shape& in) const override;
  std::vector<Param*> params() override { return {&weight, &bias}; }
  void init(std::uint64_t seed) override;
  void forward(const Shape& in, const float* x, float* y) override;
  void backward(const Shape& in, const float* x, const float* y, const float* dy, float* dx) override;
  void forward_ref(const Shape& in, const double* x, double* y) override;
  void backward_ref(const Shape& in, const double* x, const double* y, const double* dy, double* dx) override;
  double forward_flops(const Shape& in) const override { return conv_shape(in).flops(); }
  bool bf16_output_rounded() const override { return true; }  // oneDNN writes bf16, bias included
  bool bf16_dx_rounded() const override { return true; }      // oneDNN's and the sparse-dy kernel's
  // Under bf16 compute: the forward output left as oneDNN writes it, bf16 in nChw16c (onednn.h),
  // for a consumer that reads that layout; false (nothing written) where oneDNN writes another.
  bool forward_bf16_nchw16c(const Shape& in, const float* x, std::uint16_t* y16);
  // Its backward with dy in that layout (backward()'s contract otherwise); false, computing
  // nothing, where oneDNN reads dy in another layout or backward() runs over a sparse dy (backward_takes_nchw16c
  // says so up front).
  bool backward_takes_nchw16c(const Shape& in, bool dx) const;
  // forward_bf16_nchw16c from x given as bf16 in nChw16c (no input reorder); false, nothing written,
  // where oneDNN reads another layout (reads_nchw16c_src says so up front).
  bool forward_bf16_nchw16c_src(const Shape& in, const std::uint16_t* x16, std::uint16_t* y16);
  bool reads_nchw16c_src(const Shape& in) const;
  bool backward_bf16_nchw16c(const Shape& in, const float* x, const std::uint16_t* dy16, float* dx);
  // This convolution, a ReLU and `pool` as one pass per image (cpu::conv2d_forward_relu_pool): y is
  // the pool's output, and the pool keeps its argmax as forward_relu would. False, running nothing,
  // where no fused kernel takes the shape (and under bf16 compute). The backward that goes with it
  // adds this layer's weight gradients from the pool's dy and y; no input gradient (a first layer).
  bool relu_pool_fusable(const Shape& in, const MaxPool2d& pool) const;
  bool forward_relu_pool(const Shape& in, MaxPool2d& pool, const float* x, float* y);
  void backward_relu_pool(const Shape& in, const MaxPool2d& pool, const float* x, const float* y, const float* dy);
  // Its bf16-compute twin for a first layer whose forward ran in bf16 (the pool's y and argmax from
  // MaxPool2d::forward_relu_nchw16c_bf16): dw, db over the pool's winners in bf16
  // (cpu::conv2d_backward_filter_relu_pool_bf16); false, nothing written, where that kernel does not run.
  bool backward_relu_pool_bf16(const Shape& in, const MaxPool2d& pool, const float* x, const float* y, const float* dy);
  // And the forward: this first convolution, a ReLU and `pool` as one pass computing in bf16
  // (cpu::conv2d_forward_relu_pool_bf16: y and the pool's argmax, the conv output rounded to bf16);
  // false, nothing written, where that kernel does not run (or not under bf16 compute).
  // y16 (optional): y again, as bf16 in nChw16c, for a next conv's forward_bf16_nchw16c_src.
  bool forward_relu_pool_bf16(const Shape& in, MaxPool2d& pool, const float* x, float* y, std::uint16_t* y16 = nullptr);
  Conv2dShape conv_shape(const Shape& in) const;
  int in_c, out_c, k, stride, pad;
  Param weight, bias;  // [out, in, k, k], [out]

 private:
  std::vector<float> ws_, dw_tmp_;
  // The weight then bias gradients of one backward, written by a kernel (dw_scratch: sized and
  // returned) and added into Param::grad (add_dw_scratch).
  float* dw_scratch();
  void add_dw_scratch();
};

// nn.ConvTranspose2d(in, out, k, stride, padding, output_padding) with bias. It is the backward-data
// of the Conv2d from `out` to `in` channels, so its weight [in, out, k, k] is that conv's KCRS filter.
class ConvTranspose2d final : public Layer {
 public:
  ConvTranspose2d(std::string name, int in_c, int out_c, int k, int stride = 1, int pad = 0, int out_pad = 0);
  std::string kind() const override { return "ConvTranspose2d"; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<ConvTranspose2d>(*this); }
  Shape out_shape(const Shape& in) const override;
  std::vector<Param*> params() override { return {&weight, &bias}; }
  void init(std::uint64_t seed) override;
  void forward(const Shape& in, const float* x, float* y) override;
  void backward(const Shape& in, const float* x, const float* y, const float* dy, float* dx) override;
  void forward_ref(const Shape& in, const double* x, double* y) override;
  void backward_ref(const Shape& in, const double* x, const double* y, const double* dy, double* dx) override;
  double forward_flops(const Shape& in) const override { return conv_shape(in).flops(); }
  // The equivalent convolution: input = our output (out_c channels), output = our input (in_c).
  Conv2dShape conv_shape(const Shape& in) const;
  int in_c, out_c, k, stride, pad, out_pad;
  Param weight, bias;  // [in, out, k, k], [out]

 private:
  std::vector<float> ws_, dw_tmp_;
};

// nn.Linear(in, out): y = x W^T + b, W [out, in].
class Linear final : public Layer {
 public:
  Linear(std::string name, int in_f, int out_f);
  std::string kind() const override { return "Linear"; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<Linear>(*this); }
  Shape out_shape(const Shape& in) const override;
  std::vector<Param*> params() override { return {&weight, &bias}; }
  void init(std::uint64_t seed) override;
  void forward(const Shape& in, const float* x, float* y) override;
  void backward(const Shape& in, const float* x, const float* y, const float* dy, float* dx) override;
  void forward_ref(const Shape& in, const double* x, double* y) override;
  void backward_ref(const Shape& in, const double* x, const double* y, const double* dy, double* dx) override;
  double forward_flops(const Shape& in) const override { return 2.0 * in.n * in_f * out_f; }
  int in_f, out_f;
  Param weight, bias;
};

class ReLU final : public Layer {
 public:
  std::string kind() const override { return "ReLU"; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<ReLU>(*this); }
  Shape out_shape(const Shape& in) const override { return in; }
  void forward(const Shape& in, const float* x, float* y) override;
  void backward(const Shape& in, const float* x, const float* y, const float* dy, float* dx) override;
  void forward_ref(const Shape& in, const double* x, double* y) override;
  void backward_ref(const Shape& in, const double* x, const double* y, const double* dy, double* dx) override;
};

class Sigmoid final : public Layer {
 public:
  std::string kind() const override { return "Sigmoid"; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<Sigmoid>(*this); }
  Shape out_shape(const Shape& in) const override { return in; }
  void forward(const Shape& in, const float* x, float* y) override;
  void backward(const Shape& in, const float* x, const float* y, const float* dy, float* dx) override;
  void forward_ref(const Shape& in, const double* x, double* y) override;
  void backward_ref(const Shape& in, const double* x, const double* y, const double* dy, double* dx) override;
};

// nn.MaxPool2d(k): window k, stride k.
class MaxPool2d final : public Layer {
 public:
  explicit MaxPool2d(int k) : k(k) {}
  std::string kind() const override { return "MaxPool2d"; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<MaxPool2d>(*this); }
  Shape out_shape(const Shape& in) const override;
  void forward(const Shape& in, const float* x, float* y) override;
  void backward(const Shape& in, const float* x, const float* y, const float* dy, float* dx) override;
  void forward_ref(const Shape& in, const double* x, double* y) override;
  void backward_ref(const Shape& in, const double* x, const double* y, const double* dy, double* dx) override;
  // ReLU then this pool as one pass (Sequential uses it for a ReLU -> MaxPool2d pair): max-pooling
  // commutes with ReLU, so y = relu(maxpool(x)) reads x once and never writes relu(x); backward
  // writes dx (the gradient w.r.t. the ReLU's input x) in one pass from dy and the pooled y.
  void forward_relu(const Shape& in, const float* x, float* y);
  void backward_relu(const Shape& in, const float* y, const float* dy, float* dx);
  // forward_relu for k = 2 on x given as bf16 in nChw16c (a bf16 convolution's own output,
  // Conv2d::forward_bf16_nchw16c): the same y, and the same state for backward_relu.
  void forward_relu_nchw16c_bf16(const Shape& in, const std::uint16_t* x16, float* y);
  // backward_relu writing dx as bf16 in nChw16c (for Conv2d::backward_bf16_nchw16c).
  void backward_relu_nchw16c_bf16(const Shape& in, const float* y, const float* dy, std::uint16_t* dx16);
  // The argmax state for a pass that pools elsewhere (Conv2d::forward_relu_pool): sized for input `in`.
  std::int32_t* argmax_for(const Shape& in) {
    arg_.resize(out_shape(in).size());
    return arg_.data();
  }
  const std::int32_t* argmax() const { return arg_.data(); }
  int k;

 private:
  std::vector<std::int32_t> arg_;
};

// torch.flatten(x, 1): [n, c, h, w] -> [n, c*h*w, 1, 1]; memory is unchanged.
class Flatten final : public Layer {
 public:
  std::string kind() const override { return "Flatten"; }
  std::unique_ptr<Layer> clone() const override { return std::make_unique<Flatten>(*this); }
  Shape out_shape(const Shape& in) const override { return {in.n, int(in.per_item()), 1, 1}; }
  void forward(const Shape& in, const float* x, float* y) override;
  void backward(const Shape& in, const float* x, const float* y, const float* dy, float* dx) override;
  void forward_ref(const Shape& in, const double* x, double* y) override;
  void backward_ref(const Shape& in, const double* x, const double* y, const double* dy, double* dx) override;
};

// Deterministic uniform(-bound, bound) fill (splitmix64), so runs and devices agree.
void fill_uniform_bound(float* p, std::size_t n, float bound, std::uint64_t seed);

}  // namespace dlb::models
