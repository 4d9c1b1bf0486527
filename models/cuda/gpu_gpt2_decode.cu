// GPT-2's K/V-cache decoder on one GPU (models/gpt2_decode.h KvDecoder), the device twin of the
// CPU's Gpt2Decoder, fp32: the same steps per new row (embedding + position, per block LayerNorm,
// c_attn, attention against the cache, c_proj, residual, LayerNorm, c_fc, GELU, mlp.c_proj,
// residual; ln_f and the tied head) over cuBLAS and the sequence kernels the GPU trainer uses
// (kernels/cuda/seq/: embedding, rows, elementwise; kernels/cuda/nn_ops.h bias). Attention per head
// is two strided-batched GEMMs around a row softmax: S = Q K^T / sqrt(D) [H, n, T], O = S V.
// The weights are copied to the device once; the model is only read.
// Napkin math, gpt2-124m decode: ~0.5 GB of weights read per token, ~0.2 ms at an H100's ~3 TB/s,
// against ~12 x 14 + 3 launches (~0.5-0.8 ms of launch latency on an eager stream): launch-bound,
// as PyTorch eager's decode is (CUDA graphs would remove it; not done).
// Ran on an H100 (2026-11-27): tests/models/test_gpt2_decode_gpu.cu holds it against the CPU
// decoder and passes.
#include <cublas_v2.h>

#include <cmath>
#include <map>
#include <string>

#include "kernels/common/errors.h"
#include "kernels/cpu/seq/layernorm.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/handles.h"
#include "kernels/cuda/nn_ops.h"
#include "kernels/cuda/seq/elementwise.h"
#include "kernels/cuda/seq/embedding.h"
#include "kernels/cuda/seq/rows.h"
#include "models/cuda/gpu_seq_layers.h"
#include "models/gpt2.h"
#include "models/gpt2_decode.h"
#include "models/layers.h"

namespace dlb::models {

namespace {

using cuda::DeviceBuffer;
namespace gs = cuda::seq;

class GpuGpt2Decoder final : public KvDecoder {
 public:
  GpuGpt2Decoder(Model& m, const Gpt2Config& c, int max_len, const std::string& device) : c_(c), max_len_(max_len) {
    check_decoder_length(c, max_len);
    g_ = gpt2_nodes(m, c);
    cuda::use_device(device);
    stream_ = std::make_unique<cuda::Stream>();
    upload(g_.wte), upload(g_.wpe);
    for (const Gpt2Nodes::Block& b : g_.blocks)
      for (Layer* l : std::initializer_list<Layer*>{b.ln1, b.qkv, b.proj, b.ln2, b.fc, b.fcproj})
        for (Param* p : l->params()) upload(p);
    for (Param* p : g_.lnf->params()) upload(p);
    const std::size_t C = std::size_t(c.channels), L = std::size_t(max_len), H = std::size_t(c.num_heads);
    k_ = DeviceBuffer<float>(std::size_t(c.num_layers) * L * C);
    v_ = DeviceBuffer<float>(std::size_t(c.num_layers) * L * C);
    x_ = DeviceBuffer<float>(L * C), h_ = DeviceBuffer<float>(L * C), att_ = DeviceBuffer<float>(L * C);
    qkv_ = DeviceBuffer<float>(3 * L * C), fc_ = DeviceBuffer<float>(4 * L * C);
    mean_ = DeviceBuffer<float>(L), rstd_ = DeviceBuffer<float>(L);
    s_ = DeviceBuffer<float>(H * L * L);  // a prefill's [H, n, n] scores; decode uses [H, 1, T]
    logits_dev_ = DeviceBuffer<float>(L * std::size_t(c.vocab_size));
    tokens_ = DeviceBuffer<std::int32_t>(L);
  }

  void feed(const std::int32_t* tokens, int n, bool all_logits) override {
    check_feed(c_, tokens, n, pos_, max_len_);
    const int C = c_.channels;
    const std::size_t rows = std::size_t(n) * C;
    DLB_CUDA_CHECK(cudaMemcpyAsync(tokens_.data(), tokens, sizeof(std::int32_t) * n, cudaMemcpyHostToDevice, s()));
    // wte[token] + wpe[position]: the embedding's positions table starts at this feed's first one.
    gs::embedding_forward(tokens_.data(), 1, n, dev(g_.wte), C, dev(g_.wpe) + std::size_t(pos_) * C, x_.data(), s());
    for (int l = 0; l < c_.num_layers; ++l) {
      const Gpt2Nodes::Block& b = g_.blocks[std::size_t(l)];
      layer_norm(b.ln1, x_.data(), h_.data(), n);
      linear(b.qkv, h_.data(), qkv_.data(), n);
      attend(l, n);
      linear(b.proj, att_.data(), h_.data(), n);
      gs::add_broadcast(x_.data(), h_.data(), x_.data(), rows, rows, s());  // x += h (period = all of it)
      layer_norm(b.ln2, x_.data(), h_.data(), n);
      linear(b.fc, h_.data(), fc_.data(), n);
      gs::gelu_forward(fc_.data(), fc_.data(), 4 * rows, DType::fp32, s());
      linear(b.fcproj, fc_.data(), h_.data(), n);
      gs::add_broadcast(x_.data(), h_.data(), x_.data(), rows, rows, s());
    }
    pos_ += n;
    const int from = all_logits ? 0 : n - 1;
    rows_ = n - from;  // the rows whose logits are wanted
    layer_norm(g_.lnf, x_.data() + std::size_t(from) * C, h_.data(), rows_);
    // logits[rows, V] = h wte[:V]^T: the padded table's first V rows (as the CPU's tied head).
    gpu_seq::gemm(s(), DType::fp32, false, true, rows_, c_.vocab_size, C, h_.data(), C, dev(g_.wte), C, 0.f,
                  logits_dev_.data(), c_.vocab_size);
    DLB_CUDA_CHECK(cudaStreamSynchronize(s()));
  }

  const std::vector<float>& logits() override {
    logits_.resize(std::size_t(rows_) * c_.vocab_size);
    if (rows_ > 0) logits_dev_.download(logits_.data(), logits_.size(), s());
    return logits_;
  }
  int position() const override { return pos_; }
  void reset() override { pos_ = 0, rows_ = 0; }
  std::size_t cache_bytes() const override { return k_.bytes() + v_.bytes(); }

 private:
  cudaStream_t s() const { return *stream_; }
  void upload(Param* p) {
    auto& d = params_[p];
    d = DeviceBuffer<float>(p->size());
    d.upload(p->value.data(), p->size(), s());
  }
  float* dev(Param* p) { return params_.at(p).data(); }

  void layer_norm(LayerNorm* l, const float* x, float* y, int n) {
    gs::layernorm_forward(x, dev(&l->weight), dev(&l->bias), y, mean_.data(), rstd_.data(), n, l->C,
                          cpu::seq::kLayerNormEps, s());
  }
  // y[n, out] = x W^T + b (a GEMM with one row is cuBLAS's GEMV path).
  void linear(Linear* l, const float* x, float* y, int n) {
    gpu_seq::gemm(s(), DType::fp32, false, true, n, l->out_f, l->in_f, x, l->in_f, dev(&l->weight), l->in_f, 0.f, y,
                  l->out_f);
    cuda::bias_rows_forward(y, dev(&l->bias), n, l->out_f, DType::fp32, s());
  }

  // The new rows' keys and values into layer `layer`'s cache, then attention for query rows
  // [r0, r0 + n) over T positions (causal_tq n: a prompt into an empty cache; 0: every position).
  void attend(int layer, int n) {
    const int C = c_.channels;
    float* K = k_.data() + std::size_t(layer) * max_len_ * C;
    float* V = v_.data() + std::size_t(layer) * max_len_ * C;
    const std::size_t row = sizeof(float) * C, qkv_row = 3 * row;  // c_attn's rows are [q | k | v]
    DLB_CUDA_CHECK(cudaMemcpy2DAsync(K + std::size_t(pos_) * C, row, qkv_.data() + C, qkv_row, row, n,
                                     cudaMemcpyDeviceToDevice, s()));
    DLB_CUDA_CHECK(cudaMemcpy2DAsync(V + std::size_t(pos_) * C, row, qkv_.data() + 2 * C, qkv_row, row, n,
                                     cudaMemcpyDeviceToDevice, s()));
    if (pos_ == 0) return heads(K, V, 0, n, n, n);
    // After a prefix, row i sees pos + i + 1 positions: one row at a time (decode is a single row;
    // a multi-row feed after a prefix is only the tests' case).
    for (int i = 0; i < n; ++i) heads(K, V, i, 1, pos_ + i + 1, 0);
  }
  // Per head h: S_h[q, T] = Q_h K_h^T / sqrt(D), softmax by rows, O_h = S_h V_h, for query rows
  // [r0, r0 + q). Row-major as gpu_seq::gemm: each product is the column-major one of the transposes,
  // batched over heads by pointer strides (a head is D columns further along every row).
  void heads(const float* K, const float* V, int r0, int q, int T, int causal_tq) {
    const int C = c_.channels, H = c_.num_heads, D = C / H;
    const float scale = 1.f / std::sqrt(float(D)), one = 1.f, zero = 0.f;
    cublasHandle_t hb = cuda::cublas_handle_on(s());
    const float* Q = qkv_.data() + std::size_t(r0) * 3 * C;
    float* S = s_.data();
    const long long sS = (long long)q * T;
    DLB_CUBLAS_CHECK(cublasSgemmStridedBatched(hb, CUBLAS_OP_T, CUBLAS_OP_N, T, q, D, &scale, K, C, D, Q, 3 * C, D,
                                               &zero, S, T, sS, H));
    gs::softmax_forward(S, S, long(H) * q, T, causal_tq, s());
    DLB_CUBLAS_CHECK(cublasSgemmStridedBatched(hb, CUBLAS_OP_N, CUBLAS_OP_N, D, q, T, &one, V, C, D, S, T, sS, &zero,
                                               att_.data() + std::size_t(r0) * C, C, D, H));
  }

  Gpt2Config c_;
  int max_len_, pos_ = 0, rows_ = 0;
  Gpt2Nodes g_;
  std::unique_ptr<cuda::Stream> stream_;
  std::map<const Param*, DeviceBuffer<float>> params_;
  DeviceBuffer<float> k_, v_, x_, h_, att_, qkv_, fc_, mean_, rstd_, s_, logits_dev_;
  DeviceBuffer<std::int32_t> tokens_;
  std::vector<float> logits_;
};

}  // namespace

std::unique_ptr<KvDecoder> make_gpu_gpt2_decoder(Model& m, const Gpt2Config& c, int max_len, const std::string& device) {
  return std::make_unique<GpuGpt2Decoder>(m, c, max_len, device);
}

}  // namespace dlb::models
