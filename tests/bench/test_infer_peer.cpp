// The seq suite's PyTorch peer for the image models' op=infer (bench/peers/pytorch_infer.py) end to
// end through the CLI: it loads our weights and batch into the seeds' modules, its forward loss
// equals ours (the case's check), and its latencies land in the records as ours do. Skips unless
// DLBENCH_PEER_PYTHON names a python with torch (CI has none).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;
using nlohmann::json;

TEST(InferPeer, EveryImageModelIsOursOnOurWeights) {
  const char* py = std::getenv("DLBENCH_PEER_PYTHON");
  if (!py || !*py) GTEST_SKIP() << "DLBENCH_PEER_PYTHON is not set (a python with torch)";
  const fs::path dir = fs::temp_directory_path() / ("dlb-infer-peer-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string cmd = "DLBENCH_PEER_THREADS=1 DLB_SOURCE_DIR='" + std::string(DLB_SOURCE_DIR) + "' '" + DLB_CLI_PATH +
                          "' run --suite seq --device cpu --op infer --model net128,mlp,convnet,autoencoder --peer pytorch "
                          "--infer-batch 2 --repetitions 2 --min-time 0.01 --filter 'impl=pytorch' --no-report --out '" +
                          dir.string() + "' >/dev/null 2>&1";
  const int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << cmd;
  std::ifstream in(dir / "results.json");
  const json doc = json::parse(in);
  std::set<std::string> models;
  for (const auto& r : doc.at("benchmarks")) {
    if (r.value("impl", "") != "pytorch" || r.value("run_type", "") != "iteration") continue;
    if (r.value("error_occurred", false) && r.value("error_message", "").find("torch") != std::string::npos)
      GTEST_SKIP() << r.value("error_message", "");
    SCOPED_TRACE(r.value("name", ""));
    EXPECT_TRUE(r.value("verified", false));
    EXPECT_LE(r.value("max_rel_err", 1.0), r.value("tolerance", 0.0));
    EXPECT_GT(r.value("p50_ms", 0.0), 0.0);
    EXPECT_EQ(r.value("peer", ""), "pytorch");
    models.insert(r.value("model", ""));
  }
  EXPECT_EQ(models, (std::set<std::string>{"net128", "mlp", "convnet", "autoencoder"}));
  fs::remove_all(dir);
}
