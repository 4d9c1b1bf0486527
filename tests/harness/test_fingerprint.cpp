// The machine fingerprint carries what DESIGN.md promises: CPU, ISA, OpenBLAS, CUDA facts, git, env.
#include <gtest/gtest.h>

#include <cstdlib>

#include "harness/fingerprint.h"
#include "kernels/common/device.h"

using nlohmann::json;

TEST(Fingerprint, HasTheContractKeys) {
  setenv("OPENBLAS_VERBOSE", "0", 1);
  const json fp = dlb::harness::fingerprint({"dlbench", "run"});
  for (const char* k : {"date", "host_name", "num_cpus", "caches", "cpu", "openblas", "cuda", "git", "argv", "env"})
    EXPECT_TRUE(fp.contains(k)) << k;
  EXPECT_FALSE(fp["cpu"]["model"].get<std::string>().empty());
  EXPECT_GT(fp["cpu"]["logical_cores"].get<int>(), 0);
  EXPECT_FALSE(fp["openblas"]["core"].get<std::string>().empty());
  EXPECT_NE(fp["openblas"]["version"], "unknown");
  EXPECT_TRUE(fp["git"].contains("sha"));
  EXPECT_TRUE(fp["git"].contains("dirty"));
  EXPECT_EQ(fp["env"]["OPENBLAS_VERBOSE"], "0");
  EXPECT_EQ(fp["argv"][1], "run");
}

// A bundle run on another machine names its build through DLB_GIT_SHA (ci/device_run.sh).
TEST(Fingerprint, DlbGitShaNamesTheBuild) {
  setenv("DLB_GIT_SHA", "be10a10e78a7a414c20c4666169779e675457c9c (dirty)", 1);
  json fp = dlb::harness::fingerprint({"dlbench"});
  EXPECT_EQ(fp["git"]["sha"], "be10a10e78a7a414c20c4666169779e675457c9c");
  EXPECT_EQ(fp["git"]["dirty"], true);
  EXPECT_EQ(fp["git"]["from"], "DLB_GIT_SHA");
  setenv("DLB_GIT_SHA", "54cb5e9c42f75ab46652206227bc8606e327ea08", 1);
  fp = dlb::harness::fingerprint({"dlbench"});
  EXPECT_EQ(fp["git"]["sha"], "54cb5e9c42f75ab46652206227bc8606e327ea08");
  EXPECT_EQ(fp["git"]["dirty"], false);
  unsetenv("DLB_GIT_SHA");
  EXPECT_FALSE(dlb::harness::fingerprint({"dlbench"})["git"].contains("from"));
}

TEST(Fingerprint, CudaSaysWhyWhenNoDevice) {
  const auto& cu = dlb::cuda_info();
  if (cu.available) {
    EXPECT_FALSE(cu.gpus.empty());
    for (const auto& g : cu.gpus) {
      EXPECT_GT(g.sms, 0);
      EXPECT_GT(g.peak_fp32_gflops, 0);
    }
  } else {
    EXPECT_FALSE(cu.reason.empty());
    const json fp = dlb::harness::fingerprint();
    EXPECT_EQ(fp["cuda"]["available"], false);
    EXPECT_NE(dlb::harness::fingerprint_text(fp).find(cu.reason), std::string::npos);
  }
}

TEST(Fingerprint, MachineKeyNamesCpuAndLibraries) {
  const json fp = dlb::harness::fingerprint();
  const std::string k = dlb::harness::machine_key(fp);
  EXPECT_NE(k.find(fp["cpu"]["model"].get<std::string>()), std::string::npos);
  EXPECT_NE(k.find("OpenBLAS"), std::string::npos);
}
