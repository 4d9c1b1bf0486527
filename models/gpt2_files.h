// GPT-2's configurations and its files in llm.c's layouts, so the same weights train on the same
// tokens here, in llm.c and in the PyTorch peer (bench/peers/pytorch_gpt2.py):
//   checkpoint  256 int32 header {20240326, 3 (fp32), max_seq_len, vocab_size, num_layers, num_heads,
//               channels, padded_vocab_size, 0...}, then 16 fp32 tensors in llm.c's order, each
//               stacked over the layers: wte [Vp, C], wpe [maxT, C], ln1w/ln1b [L, C], qkvw [L, 3C, C],
//               qkvb [L, 3C], attprojw [L, C, C], attprojb, ln2w, ln2b [L, C], fcw [L, 4C, C],
//               fcb [L, 4C], fcprojw [L, C, 4C], fcprojb [L, C], lnfw, lnfb [C]. Weights are
//               nn.Linear's [out, in]; rows V..Vp-1 of wte are padding (zero in llm.c's files).
//   tokens      256 int32 header {20240520, 1, count, 0...}, then `count` uint16 token ids.
// Little-endian, as llm.c writes them on x86 and Arm. A malformed, truncated or oversized file is an
// InputError naming the file and the field. Seeded random weights (GPT-2's init) and tokens stand in
// when no file is given: nothing is downloaded.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dlb::models {

struct Gpt2Config {
  std::string name;  // "gpt2-124m", "gpt-mini", or the checkpoint's file name
  int max_seq_len = 0, vocab_size = 0, padded_vocab_size = 0, num_layers = 0, num_heads = 0, channels = 0;
  std::size_t num_params() const;  // with the padded wte rows, as llm.c counts them
  // Throws InputError("<what>: <field> ...") for a field out of range (checked before any allocation).
  void check(const std::string& what) const;
};

// gpt2-124m: L=12, H=12, C=768, V=50257 padded to 50304, T <= 1024 (124,475,904 parameters with the
// padding). gpt-mini: L=6, H=6, C=384, T <= 256, GPT-2's vocabulary (the same token files). UsageError
// for another name.
Gpt2Config gpt2_config(const std::string& name);
const std::vector<std::string>& gpt2_config_names();

// llm.c's tensors in file order: name, shape (layers first), offset and size in floats.
constexpr int kGpt2Tensors = 16;
enum Gpt2Tensor {
  kWte, kWpe, kLn1w, kLn1b, kQkvw, kQkvb, kAttprojw, kAttprojb, kLn2w, kLn2b, kFcw, kFcb, kFcprojw, kFcprojb, kLnfw, kLnfb
};
struct Gpt2TensorInfo {
  const char* name;
  std::vector<int> shape;
  std::size_t offset, size;
};
std::array<Gpt2TensorInfo, kGpt2Tensors> gpt2_tensors(const Gpt2Config& c);

struct Gpt2Weights {
  Gpt2Config config;
  std::vector<float> data;  // the 16 tensors back to back, llm.c's order
  float* tensor(Gpt2Tensor t) { return data.data() + gpt2_tensors(config)[t].offset; }
  const float* tensor(Gpt2Tensor t) const { return data.data() + gpt2_tensors(config)[t].offset; }
};

// GPT-2's init as llm.c's train_gpt2.py does it: weights and embeddings N(0, 0.02), the two residual
// projections (attprojw, fcprojw) N(0, 0.02 / sqrt(2 L)), biases 0, LayerNorm gains 1; padded wte
// rows 0. Philox normals by element index: the same bits on any thread count.
Gpt2Weights gpt2_random_weights(const Gpt2Config& c, std::uint64_t seed);

// Readers: the file whole, or its bytes (`what` names it in errors; the fuzz target's entry).
Gpt2Weights read_gpt2_checkpoint(const std::string& path);
Gpt2Weights parse_gpt2_checkpoint(const std::string& bytes, const std::string& what);
void write_gpt2_checkpoint(const std::string& path, const Gpt2Weights& w);  // atomically

// Tokens: every id must be < vocab (0: unchecked), else InputError naming the first bad index.
std::vector<std::uint16_t> read_gpt2_tokens(const std::string& path, int vocab);
std::vector<std::uint16_t> parse_gpt2_tokens(const std::string& bytes, const std::string& what, int vocab);
void write_gpt2_tokens(const std::string& path, const std::vector<std::uint16_t>& tokens);
std::vector<std::uint16_t> gpt2_random_tokens(std::size_t n, int vocab, std::uint64_t seed);

// Caps that bound what a header may ask for (an oversized claim fails before any allocation).
constexpr int kGpt2MaxSeqLen = 1 << 16, kGpt2MaxVocab = 1 << 20, kGpt2MaxLayers = 1024, kGpt2MaxChannels = 1 << 15;
constexpr std::uint64_t kGpt2MaxParams = std::uint64_t(1) << 31;  // 8 GiB of fp32 (GPT-2 XL: 1.56e9)
constexpr std::uint64_t kGpt2MaxTokens = std::uint64_t(1) << 31;  // llm.c's count is an int32

}  // namespace dlb::models
