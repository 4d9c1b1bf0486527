// Token data for the sequence models (models/seq_zoo.h): windows of seq + 1 tokens over a token
// stream, each a sample (its first seq tokens the input, the following ones the next-token labels),
// or with a class label per window (the RNN classifier).
//   synthetic    seeded, nothing read: each window a chain where the next token is (a * prev + b) mod
//                vocab with probability 3/4, else uniform; the classifier's class picks b, so a model
//                learns it (well above chance) but not in one step.
//   text:FILE    any local UTF-8 text, character-level: the alphabet is the distinct code points in
//                order, windows at seeded offsets. Refused with one line (InputError): a file that is
//                empty, over 64 MiB, holds NUL bytes (binary), is not valid UTF-8, is shorter than one
//                window, or whose alphabet is larger than kMaxVocab or than a vocabulary given.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dlb::models {

struct TokenData {
  std::string name;
  int vocab = 0, seq = 0;  // tokens in [0, vocab), windows of seq + 1
  int classes = 0;         // > 0: a class label per window (labels)
  std::vector<std::int32_t> stream;
  std::vector<std::uint32_t> start;  // window i is stream[start[i] .. start[i] + seq]
  std::vector<std::int32_t> labels;  // per window when classes > 0
  std::vector<std::uint32_t> alphabet;  // text: token -> Unicode code point
  std::size_t size() const { return start.size(); }
  const std::int32_t* window(std::size_t i) const { return stream.data() + start[i]; }
};

// `samples` windows of seq + 1 tokens; classes > 0 gives each window a class (its chain's).
TokenData synthetic_tokens(int vocab, int seq, int classes, std::size_t samples, std::uint64_t seed);

// A text file as a character stream. `max_vocab`: the largest alphabet accepted (the model's vocab
// when given, else kMaxVocab); windows at seeded offsets, `samples` of them.
TokenData text_tokens(const std::string& path, int seq, int max_vocab, std::size_t samples, std::uint64_t seed);

// The UTF-8 decoding text_tokens uses: code points, or InputError naming the first bad byte's offset.
std::vector<std::uint32_t> decode_utf8(const std::string& bytes, const std::string& what);

// The largest text file read: 64 MiB of text is decoded into 4-byte tokens (256 MiB) beside its
// bytes and code points, ~0.6 GiB at the peak; a character model of these sizes learns nothing more
// from a bigger file within a benchmark's epochs.
constexpr std::uint64_t kMaxTextBytes = 64ull << 20;

}  // namespace dlb::models
