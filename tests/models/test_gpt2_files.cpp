// GPT-2's configs and llm.c's files (models/gpt2_files.h): the 124M parameter count llm.c prints,
// checkpoint and token files written and read back bit for bit through real files, every header
// field out of range refused naming the field, truncated and oversized files, and the seeded init.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "kernels/common/errors.h"
#include "kernels/cpu/threads.h"
#include "models/gpt2_files.h"

using namespace dlb;
using namespace dlb::models;
namespace fs = std::filesystem;

namespace {

Gpt2Config tiny() {
  Gpt2Config c;
  c.name = "tiny";
  c.max_seq_len = 8, c.vocab_size = 50, c.padded_vocab_size = 64, c.num_layers = 2, c.num_heads = 2, c.channels = 16;
  return c;
}

struct TempDir {
  fs::path p = fs::temp_directory_path() / ("dlb-gpt2-files-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(p); }
  ~TempDir() { fs::remove_all(p); }
  std::string file(const std::string& n) const { return (p / n).string(); }
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}
void spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}
void set_int(std::string& bytes, int index, std::int32_t v) { std::memcpy(bytes.data() + 4 * index, &v, 4); }

// The InputError's message, or "" when none was thrown.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Gpt2Files, ConfigsHaveLlmcParameterCounts) {
  EXPECT_EQ(gpt2_config("gpt2-124m").num_params(), 124475904u);  // llm.c's "num_parameters: 124475904"
  const Gpt2Config m = gpt2_config("gpt-mini");
  EXPECT_EQ(m.num_layers, 6);
  EXPECT_EQ(m.channels, 384);
  EXPECT_EQ(m.max_seq_len, 256);
  EXPECT_THROW(gpt2_config("gpt3"), UsageError);
  const auto t = gpt2_tensors(tiny());
  EXPECT_STREQ(t[kQkvw].name, "qkvw");
  EXPECT_EQ(t[kQkvw].shape, (std::vector<int>{2, 48, 16}));
  EXPECT_EQ(t[kWpe].offset, 64u * 16);
  EXPECT_EQ(t[kLnfb].offset + t[kLnfb].size, tiny().num_params());
}

TEST(Gpt2Files, CheckpointRoundTripsThroughAFile) {
  TempDir d;
  const Gpt2Weights w = gpt2_random_weights(tiny(), 7);
  write_gpt2_checkpoint(d.file("m.bin"), w);
  const std::string bytes = slurp(d.file("m.bin"));
  ASSERT_EQ(bytes.size(), 1024 + 4 * tiny().num_params());
  std::int32_t h[8];
  std::memcpy(h, bytes.data(), sizeof h);
  EXPECT_EQ(std::vector<int>(h, h + 8), (std::vector<int>{20240326, 3, 8, 50, 2, 2, 16, 64}));
  const Gpt2Weights r = read_gpt2_checkpoint(d.file("m.bin"));
  EXPECT_EQ(r.config.vocab_size, 50);
  EXPECT_EQ(r.config.padded_vocab_size, 64);
  ASSERT_EQ(r.data.size(), w.data.size());
  EXPECT_EQ(std::memcmp(r.data.data(), w.data.data(), w.data.size() * 4), 0);
}

TEST(Gpt2Files, TokensRoundTripAndVocabularyIsChecked) {
  TempDir d;
  const auto t = gpt2_random_tokens(1001, 50, 3);
  for (auto x : t) ASSERT_LT(x, 50);
  write_gpt2_tokens(d.file("t.bin"), t);
  EXPECT_EQ(slurp(d.file("t.bin")).size(), 1024u + 2 * 1001);
  EXPECT_EQ(read_gpt2_tokens(d.file("t.bin"), 50), t);
  EXPECT_NE(error_of([&] { read_gpt2_tokens(d.file("t.bin"), 10); }).find("outside the model's vocabulary of 10"),
            std::string::npos);
  EXPECT_EQ(gpt2_random_tokens(1001, 50, 3), t);  // seeded
  EXPECT_NE(gpt2_random_tokens(1001, 50, 4), t);
}

// Each header field out of range is refused, naming the field, before the body is read.
TEST(Gpt2Files, BadCheckpointHeadersNameTheField) {
  TempDir d;
  write_gpt2_checkpoint(d.file("m.bin"), gpt2_random_weights(tiny(), 1));
  const std::string good = slurp(d.file("m.bin"));
  struct Bad {
    int index;
    std::int32_t value;
    const char* expect;
  };
  for (const Bad& b : {Bad{0, 20240520, "header[0] magic is 20240520"}, Bad{1, 5, "header[1] version is 5"},
                       Bad{2, 0, "header[2] max_seq_len"}, Bad{3, -1, "header[3] vocab_size"},
                       Bad{4, 100000, "header[4] num_layers"}, Bad{5, 0, "header[5] num_heads"},
                       Bad{5, 3, "num_heads 3 does not divide channels 16"}, Bad{6, 1 << 20, "header[6] channels"},
                       Bad{7, 49, "header[7] padded_vocab_size"}, Bad{7, 1 << 20, "parameters, over the cap"},
                       Bad{2, 100, "truncated: the header declares"}, Bad{2, 4, "oversized: "}}) {
    std::string bytes = good;
    set_int(bytes, b.index, b.value);
    if (b.index == 7 && b.value == 1 << 20) {  // a legal field whose product is too big: L and C at their caps
      set_int(bytes, 4, 1024), set_int(bytes, 6, 1 << 15), set_int(bytes, 5, 1);
    }
    spit(d.file("bad.bin"), bytes);
    const std::string e = error_of([&] { read_gpt2_checkpoint(d.file("bad.bin")); });
    SCOPED_TRACE(b.expect);
    EXPECT_NE(e.find(b.expect), std::string::npos) << e;
    EXPECT_NE(e.find("checkpoint " + d.file("bad.bin")), std::string::npos) << e;
    EXPECT_EQ(error_of([&] { parse_gpt2_checkpoint(bytes, "x"); }).empty(), false);
  }
}

TEST(Gpt2Files, TruncatedOversizedAndNonFiniteFiles) {
  TempDir d;
  write_gpt2_checkpoint(d.file("m.bin"), gpt2_random_weights(tiny(), 1));
  const std::string good = slurp(d.file("m.bin"));
  spit(d.file("short.bin"), good.substr(0, 1000));
  EXPECT_NE(error_of([&] { read_gpt2_checkpoint(d.file("short.bin")); }).find("truncated header: 1000 bytes"),
            std::string::npos);
  spit(d.file("cut.bin"), good.substr(0, good.size() - 4));
  EXPECT_NE(error_of([&] { read_gpt2_checkpoint(d.file("cut.bin")); }).find("truncated"), std::string::npos);
  spit(d.file("long.bin"), good + "xy");
  EXPECT_NE(error_of([&] { read_gpt2_checkpoint(d.file("long.bin")); }).find("oversized: 2 bytes"), std::string::npos);
  std::string nan = good;
  const float q = NAN;
  const auto t = gpt2_tensors(tiny());
  std::memcpy(nan.data() + 1024 + 4 * (t[kFcw].offset + 5), &q, 4);
  spit(d.file("nan.bin"), nan);
  EXPECT_NE(error_of([&] { read_gpt2_checkpoint(d.file("nan.bin")); }).find("parameter fcw[5] is not finite"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_gpt2_checkpoint(d.file("missing.bin")); }).find("cannot be read"), std::string::npos);
  EXPECT_NE(error_of([&] { read_gpt2_checkpoint(d.p.string()); }).find("is a folder"), std::string::npos);
  // Tokens: bad magic, a count of 0, truncated, oversized.
  write_gpt2_tokens(d.file("t.bin"), gpt2_random_tokens(10, 50, 1));
  const std::string tok = slurp(d.file("t.bin"));
  std::string b = tok;
  set_int(b, 0, 20240326);
  EXPECT_NE(error_of([&] { parse_gpt2_tokens(b, "t", 0); }).find("header[0] magic is 20240326"), std::string::npos);
  b = tok, set_int(b, 2, 0);
  EXPECT_NE(error_of([&] { parse_gpt2_tokens(b, "t", 0); }).find("header[2] token count is 0"), std::string::npos);
  b = tok, set_int(b, 2, 11);
  EXPECT_NE(error_of([&] { parse_gpt2_tokens(b, "t", 0); }).find("truncated"), std::string::npos);
  b = tok, set_int(b, 2, 9);
  EXPECT_NE(error_of([&] { parse_gpt2_tokens(b, "t", 0); }).find("oversized: 2 bytes"), std::string::npos);
}

// GPT-2's init: the statistics of each tensor, padded rows zero, the same bits on 1 and 2 threads.
TEST(Gpt2Files, RandomWeightsFollowGpt2Init) {
  Gpt2Config c = tiny();
  c.num_layers = 8;
  const Gpt2Weights w = gpt2_random_weights(c, 5);
  const auto ts = gpt2_tensors(c);
  auto stddev = [&](Gpt2Tensor k, std::size_t n) {
    double s = 0, s2 = 0;
    const float* p = w.tensor(k);
    for (std::size_t i = 0; i < n; ++i) s += p[i], s2 += double(p[i]) * p[i];
    return std::sqrt(s2 / n - (s / n) * (s / n));
  };
  EXPECT_NEAR(stddev(kFcw, ts[kFcw].size), 0.02, 0.001);
  EXPECT_NEAR(stddev(kFcprojw, ts[kFcprojw].size), 0.02 / std::sqrt(16.0), 0.0003);
  EXPECT_NEAR(stddev(kWte, 50 * 16), 0.02, 0.002);
  for (std::size_t i = 50 * 16; i < 64 * 16; ++i) ASSERT_EQ(w.tensor(kWte)[i], 0.f);
  for (std::size_t i = 0; i < ts[kLn2w].size; ++i) ASSERT_EQ(w.tensor(kLn2w)[i], 1.f);
  for (std::size_t i = 0; i < ts[kQkvb].size; ++i) ASSERT_EQ(w.tensor(kQkvb)[i], 0.f);
  cpu::KernelThreadsLimit one(1);
  EXPECT_EQ(gpt2_random_weights(c, 5).data, w.data);
  EXPECT_NE(gpt2_random_weights(c, 6).data, w.data);
}
