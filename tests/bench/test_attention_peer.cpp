// The attention suite's PyTorch peer (bench/peers/pytorch_attention.py) end to end through the CLI:
// it reads our seeded inputs, writes what F.scaled_dot_product_attention computed from them, and
// that output passes the fp64 check our kernels pass, forward and backward; the record names the
// backend torch used. Skips unless DLBENCH_PEER_PYTHON names a python with torch (CI has none).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;
using nlohmann::json;

TEST(AttentionPeer, SdpaOnOurInputsPassesOurCheck) {
  const char* py = std::getenv("DLBENCH_PEER_PYTHON");
  if (!py || !*py) GTEST_SKIP() << "DLBENCH_PEER_PYTHON is not set (a python with torch)";
  const fs::path dir = fs::temp_directory_path() / ("dlb-attn-peer-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string cmd = "DLBENCH_PEER_THREADS=1 DLB_SOURCE_DIR='" + std::string(DLB_SOURCE_DIR) + "' '" + DLB_CLI_PATH +
                          "' run --suite attention --device cpu --quick --peer pytorch --causal true,false --repetitions 2 "
                          "--filter 'impl=pytorch_sdpa' --no-report --out '" + dir.string() + "' >/dev/null 2>&1";
  const int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << cmd;
  std::ifstream in(dir / "results.json");
  const json doc = json::parse(in);
  int peers = 0;
  for (const auto& r : doc.at("benchmarks")) {
    if (r.value("impl", "") != "pytorch_sdpa" || r.value("run_type", "") != "iteration") continue;
    if (r.value("error_occurred", false) && r.value("error_message", "").find("torch") != std::string::npos)
      GTEST_SKIP() << r.value("error_message", "");
    SCOPED_TRACE(r.value("name", ""));
    EXPECT_TRUE(r.value("verified", false));
    EXPECT_LE(r.value("max_rel_err", 1.0), r.value("tolerance", 0.0));
    EXPECT_TRUE(r.contains("sdpa_backend"));
    EXPECT_GT(r.value("calls", 0), 0);
    ++peers;
  }
  EXPECT_EQ(peers, 4 * 2);  // forward and backward, causal and full: two repetitions each
  fs::remove_all(dir);
}
