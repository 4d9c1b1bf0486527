// The GPT-2 PyTorch peer (bench/peers/pytorch_gpt2.py) against llm.c's files as dlbench writes them:
// it reads our checkpoint and tokens, and the gradients it writes back (an llm.c checkpoint) read
// with our reader. Checks what the layout and the tied, padded LM head fix exactly: the padded wte
// rows get no gradient and their logits are 0, wpe rows past T get none, the first loss is near
// ln(V) at GPT-2's init and 10 AdamW steps on one batch lower it. Then the parity of our gpt2 model
// (models/gpt2.h) with it: the logits, the loss and every gradient after step 1, the loss of each of
// 10 AdamW steps. Its K/V-cache inference mode (--infer) checks its cache against its own full
// forward and answers timed calls. Skips unless DLBENCH_PEER_PYTHON names a python with torch (CI has none).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/common/verify.h"
#include "models/gpt2.h"
#include "models/gpt2_files.h"

using namespace dlb::models;
namespace fs = std::filesystem;

namespace {

Gpt2Config tiny() {
  Gpt2Config c;
  c.name = "tiny", c.max_seq_len = 16, c.vocab_size = 90, c.padded_vocab_size = 96, c.num_layers = 2;
  c.num_heads = 2, c.channels = 32;
  return c;
}
constexpr int B = 2, T = 8;

// Writes the tiny model's files into a fresh folder and runs the peer there with `mode` (default:
// the parity mode, lr 1e-3), `input` on its stdin: its last JSON line (every one in `lines`); skips
// (empty) without torch.
struct PeerRun {
  fs::path dir;
  nlohmann::json r;
  std::vector<nlohmann::json> lines;
  bool skipped = false;
  std::string why;
};
PeerRun run_peer(const char* tag, std::string mode = "", const std::string& input = "") {
  PeerRun p;
  const char* py = std::getenv("DLBENCH_PEER_PYTHON");
  if (!py || !*py) return p.skipped = true, p.why = "DLBENCH_PEER_PYTHON is not set (a python with torch)", p;
  p.dir = fs::temp_directory_path() / ("dlb-gpt2-" + std::string(tag) + "-" + std::to_string(::getpid()));
  fs::create_directories(p.dir);
  const Gpt2Config c = tiny();
  write_gpt2_checkpoint((p.dir / "m.bin").string(), gpt2_random_weights(c, 3));
  write_gpt2_tokens((p.dir / "t.bin").string(), gpt2_random_tokens(B * T + 1, c.vocab_size, 4));
  if (mode.empty()) mode = "--batch 2 --seq 8 --threads 1 --lr 1e-3 --parity '" + (p.dir / "par").string() + "'";
  const std::string cmd = "printf '" + input + "' | '" + std::string(py) + "' '" + DLB_SOURCE_DIR +
                          "/bench/peers/pytorch_gpt2.py' --checkpoint '" + (p.dir / "m.bin").string() + "' --tokens '" +
                          (p.dir / "t.bin").string() + "' " + mode + " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return p.why = "popen failed", p;
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, f)) out += buf;
  const int st = pclose(f);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 3) return p.skipped = true, p.why = out, p;
  if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0) || out.rfind('{') == std::string::npos) return p.why = out, p;
  for (std::size_t at = out.find('{'); at != std::string::npos; at = out.find("\n{", at + 1)) {
    const std::size_t from = out[at] == '{' ? at : at + 1;
    p.lines.push_back(nlohmann::json::parse(out.substr(from, out.find('\n', from) - from)));
  }
  p.r = p.lines.back();
  return p;
}

}  // namespace

TEST(Gpt2Peer, ReadsOurFilesAndItsGradientsReadBack) {
  const PeerRun p = run_peer("peer");
  if (p.skipped) GTEST_SKIP() << p.why;
  ASSERT_TRUE(p.r.is_object()) << p.why;
  const fs::path dir = p.dir;
  const Gpt2Config c = tiny();
  const auto losses = p.r.at("losses").get<std::vector<double>>();
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

// Our gpt2 model on the same files: step 1's logits, loss and every gradient, then 10 AdamW losses
// (the same batch each step, as the peer's parity mode) against PyTorch's.
TEST(Gpt2Peer, OursMatchesPyTorch) {
  const PeerRun p = run_peer("parity");
  if (p.skipped) GTEST_SKIP() << p.why;
  ASSERT_TRUE(p.r.is_object()) << p.why;
  const Gpt2Config c = tiny();
  const Gpt2Weights w = read_gpt2_checkpoint((p.dir / "m.bin").string());
  auto m = make_gpt2(w, T);
  Gpt2Batcher batcher(read_gpt2_tokens((p.dir / "t.bin").string(), c.vocab_size), B, T);
  const dlb::models::Batch& b = batcher.next();

  std::vector<float> theirs(std::size_t(B) * T * c.padded_vocab_size);
  std::ifstream lf(p.dir / "par" / "logits.bin", std::ios::binary);
  lf.read(reinterpret_cast<char*>(theirs.data()), std::streamsize(theirs.size() * 4));
  ASSERT_TRUE(lf.good());
  const std::vector<float> ours = m->predict(b);
  ASSERT_EQ(ours.size(), std::size_t(B) * T * c.vocab_size);
  std::vector<float> real;  // their logits without the padded columns
  for (std::size_t r = 0; r < std::size_t(B) * T; ++r)
    for (int v = 0; v < c.vocab_size; ++v) real.push_back(theirs[r * c.padded_vocab_size + v]);
  EXPECT_LT(dlb::max_rel_err(ours.data(), real.data(), real.size()), 1e-5);

  OptimizerConfig o = gpt2_optimizer();
  o.lr = 1e-3f;
  Optimizer opt(o, m->params());
  const auto losses = p.r.at("losses").get<std::vector<double>>();
  ASSERT_EQ(losses.size(), 10u);
  for (std::size_t s = 0; s < losses.size(); ++s) {
    m->zero_grad();
    const float loss = m->forward_backward(b);
    EXPECT_NEAR(loss, losses[s], 1e-5 * std::abs(losses[s])) << "step " << s + 1;
    if (s == 0) {
      const Gpt2Weights g = read_gpt2_checkpoint((p.dir / "par" / "grads.bin").string());
      const Gpt2Weights ours_g = gpt2_export(*m, c, true);
      const auto ts = gpt2_tensors(c);
      for (const auto& t : ts)
        EXPECT_LT(dlb::max_rel_err(ours_g.data.data() + t.offset, g.data.data() + t.offset, t.size), 1e-4) << t.name;
    }
    opt.step();
  }
  fs::remove_all(p.dir);
}

// --infer decode: its cached logits equal its full forward's, and each "infer" line gets one latency.
TEST(Gpt2Peer, KvCacheInferenceChecksItselfAndAnswers) {
  const PeerRun p = run_peer("infer", "--seq 5 --decode-steps 3 --threads 1 --warmup 1 --infer decode --serve", "infer\\ninfer\\n");
  if (p.skipped) GTEST_SKIP() << p.why;
  ASSERT_EQ(p.lines.size(), 3u) << p.why;
  EXPECT_TRUE(p.lines[0].value("ready", false));
  EXPECT_LT(p.lines[0].at("kv_check_rel").get<double>(), 1e-5);
  for (int i = 1; i < 3; ++i) EXPECT_GT(p.lines[std::size_t(i)].at("latencies").at(0).get<double>(), 0.0);
  fs::remove_all(p.dir);
}
