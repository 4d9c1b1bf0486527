// Elementwise, pooling, loss and optimizer kernels for training on the CPU (fp32). Layouts are
// PyTorch's (NCHW activations, row-major [rows, cols] matrices). All are memory-bound and cheap next
// to the convolutions: a few bytes moved per flop, so they are written as plain vectorizable loops.
// ReLU, max pooling and SGD split large arrays over the kernel threads (kernels/cpu/threads.h); every
// element is computed the same way whatever the split, so the results do not depend on it.
#pragma once
#include <cstddef>
#include <cstdint>

namespace dlb::cpu {

// y = max(x, 0); dx = dy * (y > 0)
void relu_forward(const float* x, float* y, std::size_t n);
void relu_backward(const float* y, const float* dy, float* dx, std::size_t n);
// y = 1 / (1 + exp(-x)); dx = dy * y * (1 - y)
void sigmoid_forward(const float* x, float* y, std::size_t n);
void sigmoid_backward(const float* y, const float* dy, float* dx, std::size_t n);

// y[i, j] += b[j] over `rows` rows of `cols`; db[j] += sum_i dy[i, j]
void bias_rows_forward(float* y, const float* b, int rows, int cols);
void bias_rows_backward(const float* dy, float* db, int rows, int cols);
// y[n, c, :] += b[c] over planes of `hw`; db[c] += sum over n and the plane of dy
void bias_nchw_forward(float* y, const float* b, int n, int c, int hw);
void bias_nchw_backward(const float* dy, float* db, int n, int c, int hw);

// Max pooling with a k x k window and stride k (no padding, floor mode, as nn.MaxPool2d(k)).
// `arg` receives the flat input index of each output's maximum; backward scatters through it.
void maxpool2d_forward(const float* x, float* y, std::int32_t* arg, int n, int c, int h, int w, int k);
void maxpool2d_backward(const float* dy, const std::int32_t* arg, float* dx, std::size_t x_size, std::size_t y_size);
// y = relu(maxpool(x)) in one pass (max pooling commutes with ReLU; ReLU as relu_forward: NaN -> 0),
// arg as maxpool2d_forward's.
void maxpool2d_relu_forward(const float* x, float* y, std::int32_t* arg, int n, int c, int h, int w, int k);
// The same for k = 2 with x given as bf16 bits in oneDNN's blocked layout nChw16c ([n][c/16][h][w][16],
// c % 16 == 0: a bf16 convolution's own output): y and arg exactly as maxpool2d_relu_forward writes
// them for the NCHW fp32 copy of x (arg the flat NCHW index of each window's winner).
void maxpool2x2_relu_forward_nchw16c_bf16(const std::uint16_t* x, float* y, std::int32_t* arg, int n, int c, int h,
                                          int w);
// Its backward into the same layout: dx (bf16 bits, nChw16c, every element written: dy rounded to
// bf16 at each window's winner where y > 0, else 0), from dy, y and arg (NCHW, as forward wrote).
void maxpool2x2_relu_backward_nchw16c_bf16(const float* dy, const float* y, const std::int32_t* arg, std::uint16_t* dx,
                                           int n, int c, int h, int w);
// Backward of relu(maxpool(x)) (k x k windows, stride k; y = the pooled, ReLU'd output, arg from
// maxpool2d_forward): dx[arg[j]] = dy[j] where y[j] > 0, every other dx element 0. One pass over dx,
// no separate zero fill.
void maxpool2d_relu_backward(const float* dy, const float* y, const std::int32_t* arg, float* dx, int n, int c, int h,
                             int w, int k);
// One image of maxpool2d_relu_forward / _backward on the calling thread, for a kernel that pools
// each image as it produces it (conv2d_forward_relu_pool): x / dx is the image's [c][h][w], y, dy
// and arg its pooled [c][h/k][w/k], and `origin` (the image's first flat index in the whole NCHW
// tensor) is added to / expected in arg, so arg reads as the whole-batch functions write it.
void maxpool2d_relu_forward_image(const float* x, float* y, std::int32_t* arg, int c, int h, int w, int k,
                                  std::int32_t origin);
void maxpool2d_relu_backward_image(const float* dy, const float* y, const std::int32_t* arg, float* dx, int c, int h,
                                   int w, int k, std::int32_t origin);

// Cross-entropy with a fused log-softmax, mean over the batch (nn.CrossEntropyLoss()).
// Returns the loss; dlogits (may be null) receives d loss / d logits = (softmax - onehot) / n.
float softmax_xent_forward_backward(const float* logits, const std::int32_t* labels, int n, int classes,
                                    float* dlogits);
// Mean squared error over all elements (nn.MSELoss()); dpred (may be null) = 2 (pred - target) / count.
float mse_forward_backward(const float* pred, const float* target, std::size_t count, float* dpred);

// For a training step with a model replica per kernel thread (models/replicas.h), whose threads
// exchange gradients: each reads the others' gradients; a plain store to a cache line that another
// core has read must first invalidate that copy, one line after another (measured on a 2-vCPU VM:
// 6-10 ns a line, 28-38 ns in phases when the two vCPUs sit far apart, against ~1 ns for a line no
// other core holds).
// zero_streaming: p[0, n) = 0 with non-temporal stores, which claim the lines without that
// exchange (the zeros go to memory; a later read fetches them from there). Stores fenced before
// return.
void zero_streaming(float* p, std::size_t n);
// out[i] = sum over k = 0, 1, .. parts-1 of parts[k][i] * w[k], in that order, each product rounded
// then added (no fused multiply-add), so every ISA path and every thread gets the same bits. out may
// be one of the parts.
void weighted_sum(float* out, const float* const* parts, const float* w, int nparts, std::size_t n);

// SGD with momentum, PyTorch semantics: buf = momentum * buf + g (buf = g on the first step);
// p -= lr * buf.
void sgd_momentum_step(float* p, const float* g, float* buf, std::size_t n, float lr, float momentum, bool first);
// Adam: kernels/cpu/seq/adamw.h with weight_decay 0.

}  // namespace dlb::cpu
