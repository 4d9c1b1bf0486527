// The gpt2 suite's llm.c peer (impl=llmc, bench/peers/llmc_gpt2.py) through the CLI: without a
// checkout (DLBENCH_LLMC_DIR unset, or a folder that is not one) and at a point train_gpt2.c cannot
// run, the case is a skipped record saying why; with one (DLBENCH_LLMC_DIR set and building, never
// on CI) llm.c trains gpt-mini at B=4, T=64 beside ours, its step-0 val loss agreeing with ours.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// `env` (shell assignments) dlbench run --suite gpt2 on the CPU, gpt-mini, `args`; the results.
json run_gpt2(const std::string& env, const std::string& args, const fs::path& out) {
  fs::remove_all(out);
  const std::string cmd = env + " DLB_SOURCE_DIR='" + std::string(DLB_SOURCE_DIR) + "' '" + DLB_CLI_PATH +
                          "' run --suite gpt2 --device cpu --config gpt-mini " + args + " --no-report --out '" +
                          out.string() + "' >/dev/null 2>&1";
  const int st = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << cmd;
  std::ifstream in(out / "results.json");
  return json::parse(in, nullptr, false);
}

fs::path scratch(const char* what) {
  return fs::temp_directory_path() / ("dlb-gpt2-llmc-" + std::to_string(::getpid()) + "-" + what);
}

}  // namespace

TEST(Gpt2Llmc, WithoutACheckoutOrAtAnotherPointTheCaseIsSkippedWithTheReason) {
  const fs::path out = scratch("skip"), empty = scratch("empty");
  fs::create_directories(empty);
  for (const std::string& env : {std::string("env -u DLBENCH_LLMC_DIR"), "DLBENCH_LLMC_DIR='" + empty.string() + "'"}) {
    SCOPED_TRACE(env);
    const json doc = run_gpt2(env, "--impl llmc --batch 1,4 --seq-len 64 --op train,infer", out);
    ASSERT_TRUE(doc.is_object());
    int seen = 0;
    for (const auto& r : doc.at("benchmarks")) {
      ASSERT_EQ(r.value("impl", ""), "llmc");
      const std::string why = r.value("skipped", "");
      if (r.value("op", "") == "infer") EXPECT_EQ(why, "llm.c's train_gpt2.c has no batch-1 K/V-cache inference");
      else if (r.value("batch", 0) == 1) EXPECT_EQ(why, "llm.c's train_gpt2.c fixes B=4, T=64");
      else if (env[0] == 'e') EXPECT_NE(why.find("DLBENCH_LLMC_DIR is not set"), std::string::npos) << why;
      else EXPECT_NE(why.find("not an llm.c checkout"), std::string::npos) << why;
      ++seen;
    }
    EXPECT_EQ(seen, 4);  // train at B=1 and B=4, infer prefill and decode
  }
  fs::remove_all(out);
  fs::remove_all(empty);
}

TEST(Gpt2Llmc, TrainsBesideOursAndAgreesOnTheValLoss) {
  const char* dir = std::getenv("DLBENCH_LLMC_DIR");
  if (!dir || !*dir) GTEST_SKIP() << "DLBENCH_LLMC_DIR is not set (an llm.c checkout; docs/peers.md)";
  const fs::path out = scratch("run");
  const json doc = run_gpt2("DLB_CPU_THREADS=1 DLBENCH_PEER_THREADS=1",
                            "--impl ours,llmc --batch 4 --seq-len 64 --repetitions 1", out);
  ASSERT_TRUE(doc.is_object());
  int llmc = 0, ours = 0;
  for (const auto& r : doc.at("benchmarks")) {
    if (r.value("impl", "") == "llmc" && r.contains("skipped"))
      GTEST_SKIP() << "llm.c peer unavailable: " << r.value("skipped", "");  // e.g. it does not build here
    if (r.value("run_type", "") != "iteration") continue;
    SCOPED_TRACE(r.value("name", ""));
    EXPECT_TRUE(r.value("verified", false));
    EXPECT_LE(r.value("max_rel_err", 1.0), r.value("tolerance", 0.0));
    EXPECT_GT(r.value("real_time", 0.0), 0);
    if (r.value("impl", "") != "llmc") {
      ours += r.value("impl", "") == "ours";
      continue;
    }
    ++llmc;
    EXPECT_EQ(r.value("peer", ""), "llmc");
    EXPECT_NE(r.value("llmc_cflags", "").find("train_gpt2.c"), std::string::npos);
    EXPECT_FALSE(r.value("llmc_commit", "").empty());
    EXPECT_EQ(r.value("llmc_omp_threads", 0), 1);
    EXPECT_TRUE(std::isfinite(r.value("mean_loss", NAN)));
  }
  EXPECT_EQ(llmc, 1);
  EXPECT_EQ(ours, 1);
  fs::remove_all(out);
}
