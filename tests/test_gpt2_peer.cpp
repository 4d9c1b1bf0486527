// The GPT-2 PyTorch peer (bench/peers/pytorch_gpt2.py) against llm.c's files as dlbench writes them:
// it reads our checkpoint and tokens, and the gradients it writes back (an llm.c checkpoint) read
// with our reader. Checks what the layout and the tied, padded LM head fix exactly: the padded wte
// rows get no gradient and their logits are 0, wpe rows past T get none, the first loss is near
// ln(V) at GPT-2's init and 10 AdamW steps on one batch lower it. Skips unless DLBENCH_PEER_PYTHON
// names a python with torch (CI has none).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "models/gpt2_files.h"

using namespace dlb::models;
namespace fs = std::filesystem;

TEST(Gpt2Peer, ReadsOurFilesAndItsGradientsReadBack) {
  const char* py = std::getenv("DLBENCH_PEER_PYTHON");
  if (!py || !*py) GTEST_SKIP() << "DLBENCH_PEER_PYTHON is not set (a python with torch)";
  const fs::path dir = fs::temp_directory_path() / ("dlb-gpt2-peer-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  Gpt2Config c;
  c.name = "tiny", c.max_seq_len = 16, c.vocab_size = 90, c.padded_vocab_size = 96, c.num_layers = 2;
  c.num_heads = 2, c.channels = 32;
  const int B = 2, T = 8;
  write_gpt2_checkpoint((dir / "m.bin").string(), gpt2_random_weights(c, 3));
  write_gpt2_tokens((dir / "t.bin").string(), gpt2_random_tokens(B * T + 1, c.vocab_size, 4));
  const std::string cmd = "'" + std::string(py) + "' '" + DLB_SOURCE_DIR + "/bench/peers/pytorch_gpt2.py' --checkpoint '" +
                          (dir / "m.bin").string() + "' --tokens '" + (dir / "t.bin").string() +
                          "' --batch 2 --seq 8 --threads 1 --lr 1e-3 --parity '" + (dir / "par").string() + "' 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, f)) out += buf;
  const int st = pclose(f);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 3) GTEST_SKIP() << out;
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << out;
  const auto r = nlohmann::json::parse(out.substr(out.rfind('{')));
  const auto losses = r.at("losses").get<std::vector<double>>();
  ASSERT_EQ(losses.size(), 10u);
  EXPECT_NEAR(losses[0], std::log(90.0), 0.3);  // N(0, 0.02) weights: near-uniform predictions
  EXPECT_LT(losses[9], losses[0] - 0.1);

  const Gpt2Weights g = read_gpt2_checkpoint((dir / "par" / "grads.bin").string());
  const auto ts = gpt2_tensors(c);
  double wte_norm = 0;
  for (std::size_t i = 0; i < std::size_t(c.padded_vocab_size) * c.channels; ++i) {
    if (i >= std::size_t(c.vocab_size) * c.channels) {
      ASSERT_EQ(g.tensor(kWte)[i], 0.f) << "padded wte row " << i / c.channels;
    }
    wte_norm += double(g.tensor(kWte)[i]) * g.tensor(kWte)[i];
  }
  EXPECT_GT(wte_norm, 0);
  for (std::size_t i = std::size_t(T) * c.channels; i < ts[kWpe].size; ++i) ASSERT_EQ(g.tensor(kWpe)[i], 0.f);
  std::ifstream lf(dir / "par" / "logits.bin", std::ios::binary);
  std::vector<float> logits(std::size_t(B) * T * c.padded_vocab_size);
  lf.read(reinterpret_cast<char*>(logits.data()), std::streamsize(logits.size() * 4));
  ASSERT_TRUE(lf.good());
  EXPECT_EQ(lf.peek(), EOF);
  for (std::size_t row = 0; row < std::size_t(B) * T; ++row)
    for (int v = c.vocab_size; v < c.padded_vocab_size; ++v) ASSERT_EQ(logits[row * c.padded_vocab_size + v], 0.f);
  fs::remove_all(dir);
}
