// Token data (see seq_data.h): the synthetic chains, and text files read, checked and decoded.
#include "models/seq_data.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "kernels/common/errors.h"
#include "kernels/common/safe_file.h"

namespace dlb::models {

namespace {
// splitmix64: the stream every seeded draw here takes its numbers from.
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  std::uint32_t below(std::uint64_t n) { return std::uint32_t(next() % n); }
};
}  // namespace

TokenData synthetic_tokens(int vocab, int seq, int classes, std::size_t samples, std::uint64_t seed) {
  TokenData d;
  d.name = "synthetic", d.vocab = vocab, d.seq = seq, d.classes = classes;
  const std::size_t w = std::size_t(seq) + 1;
  d.stream.resize(samples * w);
  d.start.resize(samples);
  if (classes > 0) d.labels.resize(samples);
  Rng r{seed * 0xD1B54A32D192ED03ULL + 11};
  const std::uint64_t a = 2 * std::uint64_t(vocab / 4) + 1;  // odd: the chain visits many tokens
  for (std::size_t i = 0; i < samples; ++i) {
    const int c = classes > 0 ? int(r.below(std::uint64_t(classes))) : 0;
    const std::uint64_t b = 1 + 7 * std::uint64_t(c);
    std::int32_t* t = d.stream.data() + i * w;
    t[0] = std::int32_t(r.below(std::uint64_t(vocab)));
    for (std::size_t k = 1; k < w; ++k)
      t[k] = r.below(4) ? std::int32_t((a * std::uint64_t(t[k - 1]) + b) % std::uint64_t(vocab))
                        : std::int32_t(r.below(std::uint64_t(vocab)));
    d.start[i] = std::uint32_t(i * w);
    if (classes > 0) d.labels[i] = c;
  }
  return d;
}

std::vector<std::uint32_t> decode_utf8(const std::string& bytes, const std::string& what) {
  std::vector<std::uint32_t> cps;
  cps.reserve(bytes.size());
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t n = bytes.size();
  auto bad = [&](std::size_t at) {
    throw InputError(what + ": not UTF-8 text (an invalid byte sequence at byte " + std::to_string(at) + ")");
  };
  for (std::size_t i = 0; i < n;) {
    const unsigned c = s[i];
    if (c == 0) throw InputError(what + ": a binary file (a NUL byte at byte " + std::to_string(i) + "), not text");
    int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (!len || i + std::size_t(len) > n) bad(i);
    std::uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (int k = 1; k < len; ++k) {
      if ((s[i + std::size_t(k)] & 0xC0) != 0x80) bad(i);
      cp = (cp << 6) | (s[i + std::size_t(k)] & 0x3F);
    }
    // overlong forms, surrogates and code points past U+10FFFF are not UTF-8
    const std::uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[len] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) bad(i);
    cps.push_back(cp);
    i += std::size_t(len);
  }
  return cps;
}

TokenData text_tokens(const std::string& path, int seq, int max_vocab, std::size_t samples, std::uint64_t seed) {
  const std::string what = "text " + path;
  if (path.empty()) throw InputError("--dataset text:FILE: no file named");
  std::error_code ec;
  if (const auto size = std::filesystem::file_size(path, ec); !ec && size > kMaxTextBytes)
    throw InputError(what + ": " + std::to_string(size >> 20) + " MiB, over the " + std::to_string(kMaxTextBytes >> 20) +
                     " MiB limit for a text dataset (decoded to 4-byte tokens beside its bytes and code points: ~9x its size in memory at the peak)");
  const std::string bytes = read_file_safely(path, kMaxTextBytes);
  if (bytes.empty()) throw InputError(what + ": the file is empty");
  const std::vector<std::uint32_t> cps = decode_utf8(bytes, what);
  TokenData d;
  d.name = "text:" + path, d.seq = seq;
  std::map<std::uint32_t, std::int32_t> id;
  for (std::uint32_t cp : cps) id.emplace(cp, 0);
  if (id.size() > std::size_t(max_vocab))
    throw InputError(what + ": its " + std::to_string(id.size()) + " distinct characters do not fit a vocabulary of " +
                     std::to_string(max_vocab));
  for (auto& [cp, k] : id) k = std::int32_t(d.alphabet.size()), d.alphabet.push_back(cp);
  d.vocab = int(d.alphabet.size());
  if (cps.size() < std::size_t(seq) + 1)
    throw InputError(what + ": " + std::to_string(cps.size()) + " characters, shorter than one sequence of " +
                     std::to_string(seq + 1));
  d.stream.reserve(cps.size());
  for (std::uint32_t cp : cps) d.stream.push_back(id[cp]);
  Rng r{seed * 0xD1B54A32D192ED03ULL + 17};
  const std::uint64_t starts = cps.size() - std::size_t(seq);  // windows of seq + 1 fit at [0, starts)
  d.start.resize(samples);
  for (auto& s : d.start) s = std::uint32_t(r.below(starts));
  return d;
}

}  // namespace dlb::models
