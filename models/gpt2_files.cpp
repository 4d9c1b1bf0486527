// GPT-2's configurations, llm.c's checkpoint and token files, seeded weights and tokens (see
// gpt2_files.h). A file's header is read and checked first (read_file_head), so a hostile header
// never makes us allocate or read what it claims; the body is then read with the exact size the
// header implies as its cap.
#include "models/gpt2_files.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/common/errors.h"
#include "kernels/common/philox.h"
#include "kernels/common/safe_file.h"
#include "kernels/cpu/seq/parallel.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "llm.c's files are little-endian, read in place");

namespace dlb::models {

namespace {

constexpr int kHeaderInts = 256;
constexpr std::size_t kHeaderBytes = kHeaderInts * sizeof(std::int32_t);
constexpr std::int32_t kCheckpointMagic = 20240326, kCheckpointVersion = 3;
constexpr std::int32_t kTokensMagic = 20240520, kTokensVersion = 1;

[[noreturn]] void bad(const std::string& what, const std::string& why) { throw InputError(what + ": " + why); }

std::array<std::int32_t, kHeaderInts> header_of(const std::string& bytes, const std::string& what, const char* kind) {
  if (bytes.size() < kHeaderBytes)
    bad(what, std::string("truncated header: ") + std::to_string(bytes.size()) + " bytes, an llm.c " + kind +
                  " file starts with 1024 (256 int32)");
  std::array<std::int32_t, kHeaderInts> h{};
  std::memcpy(h.data(), bytes.data(), kHeaderBytes);
  return h;
}

void check_magic(const std::array<std::int32_t, kHeaderInts>& h, const std::string& what, std::int32_t magic,
                 std::int32_t version, const char* kind) {
  if (h[0] != magic)
    bad(what, "header[0] magic is " + std::to_string(h[0]) + ", an llm.c " + kind + " file has " + std::to_string(magic));
  if (h[1] != version)
    bad(what, "header[1] version is " + std::to_string(h[1]) + ", expected " + std::to_string(version) +
                  (magic == kCheckpointMagic ? " (fp32 weights; llm.c's version 5 holds bf16)" : ""));
}

// The body must be exactly `want` bytes after the header.
void check_size(std::uint64_t file_bytes, std::uint64_t want, const std::string& what, const std::string& body) {
  const std::uint64_t have = file_bytes - kHeaderBytes;
  if (have < want)
    bad(what, "truncated: the header declares " + body + " (" + std::to_string(want) + " bytes), the file holds " +
                  std::to_string(have) + " after the header");
  if (have > want)
    bad(what, "oversized: " + std::to_string(have - want) + " bytes after the " + body + " the header declares");
}

Gpt2Config config_of(const std::array<std::int32_t, kHeaderInts>& h, const std::string& what) {
  Gpt2Config c;
  c.name = what;
  c.max_seq_len = h[2], c.vocab_size = h[3], c.num_layers = h[4], c.num_heads = h[5], c.channels = h[6];
  c.padded_vocab_size = h[7];
  c.check(what);
  return c;
}

Gpt2Weights checkpoint_body(const Gpt2Config& c, const std::string& bytes, const std::string& what) {
  Gpt2Weights w;
  w.config = c;
  w.data.resize(c.num_params());
  std::memcpy(w.data.data(), bytes.data() + kHeaderBytes, w.data.size() * sizeof(float));
  for (const auto& t : gpt2_tensors(c))
    for (std::size_t i = 0; i < t.size; ++i)
      if (!std::isfinite(w.data[t.offset + i]))
        bad(what, std::string("parameter ") + t.name + "[" + std::to_string(i) + "] is not finite");
  return w;
}

std::vector<std::uint16_t> tokens_body(const std::string& bytes, std::size_t n, const std::string& what, int vocab) {
  std::vector<std::uint16_t> t(n);
  std::memcpy(t.data(), bytes.data() + kHeaderBytes, n * sizeof(std::uint16_t));
  if (vocab > 0)
    for (std::size_t i = 0; i < n; ++i)
      if (t[i] >= vocab)
        bad(what, "token " + std::to_string(i) + " is " + std::to_string(t[i]) + ", outside the model's vocabulary of " +
                      std::to_string(vocab));
  return t;
}

std::uint64_t token_count(const std::array<std::int32_t, kHeaderInts>& h, const std::string& what) {
  if (h[2] < 1) bad(what, "header[2] token count is " + std::to_string(h[2]) + ", expected at least 1");
  return std::uint64_t(h[2]);
}

std::string header_bytes(const std::array<std::int32_t, kHeaderInts>& h) {
  return std::string(reinterpret_cast<const char*>(h.data()), kHeaderBytes);
}

void write_or_fail(const std::string& path, const std::string& bytes) {
  try {
    write_file_atomically(path, bytes);
  } catch (const std::runtime_error& e) {
    throw InputError(e.what());
  }
}

// Philox words as uniforms in (0, 1]: element i of a stream uses block i / 2, words 2 (i % 2) and +1.
inline float normal_at(std::uint64_t seed, std::size_t i) {
  const Philox4 r = philox_block(seed, i / 2);
  const std::uint32_t a = r.v[2 * (i % 2)], b = r.v[2 * (i % 2) + 1];
  const float u1 = 1.f - philox_uniform(a), u2 = philox_uniform(b);  // u1 in (0, 1]: log is finite
  return std::sqrt(-2.f * std::log(u1)) * std::cos(6.28318530718f * u2);
}

}  // namespace

std::size_t Gpt2Config::num_params() const {
  const auto t = gpt2_tensors(*this);
  return t.back().offset + t.back().size;
}

void Gpt2Config::check(const std::string& what) const {
  auto range = [&](const char* field, long long v, long long lo, long long hi) {
    if (v < lo || v > hi)
      bad(what, std::string(field) + " is " + std::to_string(v) + ", expected " + std::to_string(lo) + ".." +
                    std::to_string(hi));
  };
  range("header[2] max_seq_len", max_seq_len, 1, kGpt2MaxSeqLen);
  range("header[3] vocab_size", vocab_size, 1, kGpt2MaxVocab);
  range("header[4] num_layers", num_layers, 1, kGpt2MaxLayers);
  range("header[6] channels", channels, 1, kGpt2MaxChannels);
  range("header[5] num_heads", num_heads, 1, channels);
  if (channels % num_heads != 0)
    bad(what, "header[5] num_heads " + std::to_string(num_heads) + " does not divide channels " + std::to_string(channels));
  range("header[7] padded_vocab_size", padded_vocab_size, vocab_size, kGpt2MaxVocab);
  const std::uint64_t C = std::uint64_t(channels), L = std::uint64_t(num_layers);
  const std::uint64_t n = (std::uint64_t(padded_vocab_size) + std::uint64_t(max_seq_len)) * C + L * (12 * C * C + 13 * C) + 2 * C;
  if (n > kGpt2MaxParams)
    bad(what, "the header's sizes make " + std::to_string(n) + " parameters, over the cap of " + std::to_string(kGpt2MaxParams));
}

Gpt2Config gpt2_config(const std::string& name) {
  Gpt2Config c;
  c.name = name;
  c.vocab_size = 50257, c.padded_vocab_size = 50304;  // GPT-2's BPE; padded to a multiple of 128 as llm.c does
  if (name == "gpt2-124m") c.max_seq_len = 1024, c.num_layers = 12, c.num_heads = 12, c.channels = 768;
  else if (name == "gpt-mini") c.max_seq_len = 256, c.num_layers = 6, c.num_heads = 6, c.channels = 384;
  else throw UsageError("config '" + name + "': unknown GPT-2 config (expected gpt2-124m or gpt-mini)");
  return c;
}

const std::vector<std::string>& gpt2_config_names() {
  static const std::vector<std::string> names{"gpt2-124m", "gpt-mini"};
  return names;
}

std::array<Gpt2TensorInfo, kGpt2Tensors> gpt2_tensors(const Gpt2Config& c) {
  const int Vp = c.padded_vocab_size, T = c.max_seq_len, L = c.num_layers, C = c.channels;
  std::array<Gpt2TensorInfo, kGpt2Tensors> t{{
      {"wte", {Vp, C}, 0, 0},           {"wpe", {T, C}, 0, 0},         {"ln1w", {L, C}, 0, 0},
      {"ln1b", {L, C}, 0, 0},           {"qkvw", {L, 3 * C, C}, 0, 0}, {"qkvb", {L, 3 * C}, 0, 0},
      {"attprojw", {L, C, C}, 0, 0},    {"attprojb", {L, C}, 0, 0},    {"ln2w", {L, C}, 0, 0},
      {"ln2b", {L, C}, 0, 0},           {"fcw", {L, 4 * C, C}, 0, 0},  {"fcb", {L, 4 * C}, 0, 0},
      {"fcprojw", {L, C, 4 * C}, 0, 0}, {"fcprojb", {L, C}, 0, 0},     {"lnfw", {C}, 0, 0},
      {"lnfb", {C}, 0, 0},
  }};
  std::size_t off = 0;
  for (auto& x : t) {
    x.size = 1;
    for (const int d : x.shape) x.size *= std::size_t(d);
    x.offset = off;
    off += x.size;
  }
  return t;
}

Gpt2Weights gpt2_random_weights(const Gpt2Config& c, std::uint64_t seed) {
  c.check(c.name);
  Gpt2Weights w;
  w.config = c;
  w.data.assign(c.num_params(), 0.f);
  const float proj_std = 0.02f / std::sqrt(2.f * float(c.num_layers));
  const auto ts = gpt2_tensors(c);
  for (int k = 0; k < kGpt2Tensors; ++k) {
    const auto& t = ts[std::size_t(k)];
    float* p = w.data.data() + t.offset;
    const std::size_t n = k == kWte ? std::size_t(c.vocab_size) * std::size_t(c.channels) : t.size;
    float sd = 0;
    if (k == kWte || k == kWpe || k == kQkvw || k == kFcw) sd = 0.02f;
    else if (k == kAttprojw || k == kFcprojw) sd = proj_std;
    else if (k == kLn1w || k == kLn2w || k == kLnfw) std::fill(p, p + n, 1.f);
    if (sd == 0) continue;
    const std::uint64_t stream = seed * 0x9E3779B97F4A7C15ULL + std::uint64_t(k);  // a stream per tensor
    cpu::seq::parallel_rows(long(n), 1, [&](long lo, long hi) {
      for (long i = lo; i < hi; ++i) p[i] = sd * normal_at(stream, std::size_t(i));
    });
  }
  return w;
}

Gpt2Weights parse_gpt2_checkpoint(const std::string& bytes, const std::string& what) {
  const auto h = header_of(bytes, what, "checkpoint");
  check_magic(h, what, kCheckpointMagic, kCheckpointVersion, "checkpoint");
  const Gpt2Config c = config_of(h, what);
  check_size(bytes.size(), c.num_params() * sizeof(float), what, std::to_string(c.num_params()) + " fp32 parameters");
  return checkpoint_body(c, bytes, what);
}

Gpt2Weights read_gpt2_checkpoint(const std::string& path) {
  std::uint64_t size = 0;
  const std::string what = "checkpoint " + path;
  const auto h = header_of(read_file_head(path, kHeaderBytes, &size), what, "checkpoint");
  check_magic(h, what, kCheckpointMagic, kCheckpointVersion, "checkpoint");
  const Gpt2Config c = config_of(h, what);
  check_size(size, c.num_params() * sizeof(float), what, std::to_string(c.num_params()) + " fp32 parameters");
  return parse_gpt2_checkpoint(read_file_safely(path, kHeaderBytes + c.num_params() * sizeof(float)), what);
}

void write_gpt2_checkpoint(const std::string& path, const Gpt2Weights& w) {
  const Gpt2Config& c = w.config;
  c.check("checkpoint " + path);
  if (w.data.size() != c.num_params()) throw std::invalid_argument("write_gpt2_checkpoint: weights do not fit the config");
  std::array<std::int32_t, kHeaderInts> h{};
  h[0] = kCheckpointMagic, h[1] = kCheckpointVersion, h[2] = c.max_seq_len, h[3] = c.vocab_size;
  h[4] = c.num_layers, h[5] = c.num_heads, h[6] = c.channels, h[7] = c.padded_vocab_size;
  std::string bytes = header_bytes(h);
  bytes.append(reinterpret_cast<const char*>(w.data.data()), w.data.size() * sizeof(float));
  write_or_fail(path, bytes);
}

std::vector<std::uint16_t> parse_gpt2_tokens(const std::string& bytes, const std::string& what, int vocab) {
  const auto h = header_of(bytes, what, "tokens");
  check_magic(h, what, kTokensMagic, kTokensVersion, "tokens");
  const std::uint64_t n = token_count(h, what);
  check_size(bytes.size(), n * sizeof(std::uint16_t), what, std::to_string(n) + " uint16 tokens");
  return tokens_body(bytes, std::size_t(n), what, vocab);
}

std::vector<std::uint16_t> read_gpt2_tokens(const std::string& path, int vocab) {
  std::uint64_t size = 0;
  const std::string what = "tokens " + path;
  const auto h = header_of(read_file_head(path, kHeaderBytes, &size), what, "tokens");
  check_magic(h, what, kTokensMagic, kTokensVersion, "tokens");
  const std::uint64_t n = token_count(h, what);
  check_size(size, n * sizeof(std::uint16_t), what, std::to_string(n) + " uint16 tokens");
  return parse_gpt2_tokens(read_file_safely(path, kHeaderBytes + n * sizeof(std::uint16_t)), what, vocab);
}

void write_gpt2_tokens(const std::string& path, const std::vector<std::uint16_t>& tokens) {
  if (tokens.empty() || tokens.size() >= kGpt2MaxTokens)
    throw std::invalid_argument("write_gpt2_tokens: 1 .. 2^31-1 tokens");
  std::array<std::int32_t, kHeaderInts> h{};
  h[0] = kTokensMagic, h[1] = kTokensVersion, h[2] = std::int32_t(tokens.size());
  std::string bytes = header_bytes(h);
  bytes.append(reinterpret_cast<const char*>(tokens.data()), tokens.size() * sizeof(std::uint16_t));
  write_or_fail(path, bytes);
}

std::vector<std::uint16_t> gpt2_random_tokens(std::size_t n, int vocab, std::uint64_t seed) {
  if (vocab < 1 || vocab > 65536) throw std::invalid_argument("gpt2_random_tokens: vocab 1..65536");
  std::vector<std::uint16_t> t(n);
  for (std::size_t i = 0; i < n; ++i) {
    const Philox4 r = philox_block(seed, i / 4);
    t[i] = std::uint16_t((std::uint64_t(r.v[i % 4]) * std::uint64_t(vocab)) >> 32);  // uniform in [0, vocab)
  }
  return t;
}

}  // namespace dlb::models
