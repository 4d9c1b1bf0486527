// The layer interface: forward and backward on the CPU in fp32, and an fp64 reference of both (the
// gradient checks and the verification of every training case use it). Everything faster than a
// layer's own forward/backward (fusions, bf16 compute, layout hand-offs) is a step of a plan
// (models/plan.h), not a method here. One layer type = one file pair in models/layers/ plus a row of
// the Op table (layer.cpp); docs/adding.md says how.
//
// Gradient semantics follow PyTorch: backward ADDS into Param::grad (zero_grad clears it) and
// OVERWRITES the input gradients dx (the executor sums where a tensor feeds several layers). The
// reference adds into Param::ref_grad and reads Param::ref_value (fp64), which Model::sync_ref()
// fills from the fp32 values.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace dlb::models {

// A tensor's shape, outermost dimension first as PyTorch lists it: [n, c, h, w] for images, [n,
// features] after a flatten, [n, seq, features] for sequences. Dimension 0 is the batch. Image layers
// read it through c(), h(), w() (dims 1..3).
class Shape {
 public:
  static constexpr int kMaxRank = 6;
  Shape() = default;
  Shape(std::initializer_list<int> dims);
  int rank() const { return rank_; }
  int operator[](int i) const { return d_[std::size_t(i)]; }
  int& operator[](int i) { return d_[std::size_t(i)]; }
  int n() const { return rank_ ? d_[0] : 1; }
  int c() const { return rank_ > 1 ? d_[1] : 1; }
  int h() const { return rank_ > 2 ? d_[2] : 1; }
  int w() const { return rank_ > 3 ? d_[3] : 1; }
  int last() const { return rank_ ? d_[std::size_t(rank_ - 1)] : 1; }  // features of a [.., features] tensor
  std::size_t size() const;
  std::size_t per_item() const;  // size() / n()
  Shape with_batch(int n) const;
  Shape appended(int d) const;    // one more innermost dimension: [n, seq] -> [n, seq, d]
  Shape without(int axis) const;  // dimension `axis` dropped: [n, seq, f] -> [n, f]
  std::string str() const;  // "64x3x32x32"
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }

 private:
  std::array<int, kMaxRank> d_{};
  int rank_ = 0;
};

// The shapes of a layer's inputs (a view; one Shape converts to it, for one-input layers).
struct Shapes {
  const Shape* p;
  int count;
  Shapes(const Shape& s) : p(&s), count(1) {}  // NOLINT: implicit on purpose
  Shapes(const Shape* s, int n) : p(s), count(n) {}
  const Shape& operator[](int k) const { return p[k]; }
};

struct Param {
  std::string name;        // "conv1.weight"
  std::vector<int> shape;  // PyTorch's shape
  std::vector<float> value, grad;
  std::vector<double> ref_value, ref_grad;
  std::size_t size() const { return value.size(); }
  void resize(std::vector<int> s);
};

// The layer types. A row of the table in layer.cpp each: PyTorch's module name, the op autocast
// looks up (models/amp.h), the profile name of a parameter-free layer, whether its output is exact
// in any dtype (autocast rounds nothing after it). Plans and the GPU trainer switch on this enum.
// custom: a layer without a row yet (a test's, a prototype's): it runs as a plain CPU step, autocast
// and the GPU trainer refuse it.
enum class Op {
  conv2d, conv_transpose2d, linear, relu, sigmoid, max_pool2d, flatten, add,
  // the sequence models' (models/seq_zoo.cpp)
  embedding, rnn_tanh, lstm, select_step, layer_norm, dropout, positional_encoding, multihead_attention,
  // GPT-2's (models/gpt2.cpp)
  gelu, position_embedding, lm_head,
  custom
};
struct OpInfo {
  Op op;
  const char* kind;      // "Conv2d"
  const char* autocast;  // "conv2d"
  const char* short_name;  // "relu" -> regions "relu1", "relu2"
  bool exact;
};
const OpInfo& op_info(Op op);
inline const char* op_name(Op op) { return op_info(op).kind; }

// One call over a batch: the input shapes and data (a float input as x(k), an integer one as
// ids(k): token ids, as the layer declares), and the output. T = float (fast) or double (reference).
template <class T>
struct Fwd {
  Shapes in;
  const void* const* xs;
  T* y;
  const T* x(int k = 0) const { return static_cast<const T*>(xs[k]); }
  const std::int32_t* ids(int k = 0) const { return static_cast<const std::int32_t*>(xs[k]); }
};
// Backward also gets the output y, its gradient dy and where to write each input's gradient:
// dx(k) null where none is wanted (a model input, an integer input).
template <class T>
struct Bwd {
  Shapes in;
  const void* const* xs;
  const T* y;
  const T* dy;
  T* const* dxs;
  const T* x(int k = 0) const { return static_cast<const T*>(xs[k]); }
  const std::int32_t* ids(int k = 0) const { return static_cast<const std::int32_t*>(xs[k]); }
  T* dx(int k = 0) const { return dxs[k]; }
};

class Layer {
 public:
  static constexpr int kMaxInputs = 4;
  virtual ~Layer() = default;
  virtual Op op() const = 0;
  virtual int inputs() const { return 1; }
  // Whether input k holds integers (token ids): it gets no gradient.
  virtual bool integer_input(int k) const { (void)k; return false; }
  virtual Shape out_shape(Shapes in) const = 0;  // throws InputError when `in` does not fit
  // The parameters this layer reads: its own, and any it borrows from another layer.
  virtual std::vector<Param*> params() { return {}; }
  // Where it keeps the borrowed ones (a tied weight: GPT-2's LM head reads the token embedding's):
  // the model lists such a parameter once, under its owner, and Model::clone() repoints these slots.
  virtual std::vector<Param**> borrowed() { return {}; }
  // A copy of this layer: its parameters (values, gradients) and configuration; its scratch may be
  // copied or left empty (a copy may not share any buffer with this one).
  virtual std::unique_ptr<Layer> clone() const = 0;
  // Seeded PyTorch default init; layers without parameters ignore it.
  virtual void init(std::uint64_t seed) { (void)seed; }
  // Fast fp32 path and the fp64 reference (direct loops).
  virtual void forward(const Fwd<float>& a) = 0;
  virtual void backward(const Bwd<float>& a) = 0;
  virtual void forward_ref(const Fwd<double>& a) = 0;
  virtual void backward_ref(const Bwd<double>& a) = 0;
  // FLOPs of forward for one batch (napkin math for GFLOP/s; backward is twice that with dx).
  virtual double forward_flops(Shapes in) const { (void)in; return 0; }
  // Training or evaluation (model.eval(): Dropout passes its input through), and the training step
  // a layer drawing random numbers keys them by (Dropout's Philox mask: the same step gives the same
  // mask in the fp32 path and the reference, the next step another). Model::set_step calls it.
  virtual void set_step(bool training, std::uint64_t step) { (void)training, (void)step; }
};

// Deterministic uniform(-bound, bound) fill (splitmix64), so runs and devices agree.
void fill_uniform_bound(float* p, std::size_t n, float bound, std::uint64_t seed);
// Deterministic normal(0, stddev) fill (Box-Muller over the same stream): nn.Embedding's init.
void fill_normal(float* p, std::size_t n, float stddev, std::uint64_t seed);
// Param::grad += src (the steps that compute a weight gradient into scratch).
void add_into(float* dst, const float* src, std::size_t n);

}  // namespace dlb::models
