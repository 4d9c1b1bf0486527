// Suite gpt2 (bench/gpt2.cpp), ours at the quick size (gpt-mini, batch 1, seq 32): a case verifies,
// runs AdamW steps, and its --profile step records every layer's forward and backward, the loss,
// zero_grad and AdamW, and matches an unprofiled step's loss and gradients. On a GPU: which cases of
// ours skip, and why.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <string>

#include "bench/suite.h"
#include "kernels/common/errors.h"
#include "kernels/cpu/isa.h"
#include "models/plan.h"

using namespace dlb;
using bench::json;

TEST(Gpt2Suite, OursProfilesEveryLayerAndChecksTheStep) {
  const bench::Suite& s = *bench::find_suite("gpt2");
  bench::SuiteOptions o = s.options(true, json::object());
  o.devices = {"cpu"};
  const auto cases = s.expand(o);
  ASSERT_EQ(cases.size(), 1u);
  auto c = cases[0].make();
  c->setup();
  const auto v = c->verify();
  EXPECT_TRUE(v.ok) << v.message;
  c->run();
  bench::ProfileResult p;
  ASSERT_TRUE(c->profile(p));
  EXPECT_TRUE(p.verified) << p.max_rel_err;
  EXPECT_EQ(p.device, "cpu");
  std::set<std::string> names;
  int forward = 0, backward = 0;
  for (const auto& r : p.regions) {
    names.insert(r.name);
    forward += r.cat == "forward" && !r.layer.empty();
    backward += r.cat == "backward" && !r.layer.empty();
    EXPECT_GE(r.dur_us, 0) << r.name;
  }
  for (const char* n : {"step", "zero_grad", "loss", "optimizer", "forward wte", "backward h.0.mlp.c_fc", "forward ln_f"})
    EXPECT_TRUE(names.count(n)) << n;
  EXPECT_EQ(forward, backward);
  EXPECT_GT(forward, 6 * 9);  // gpt-mini: 6 blocks of 9 layers, and the embeddings and the head
  const json sum = bench::profile_summary(p);
  EXPECT_GT(sum.at("step_ms").get<double>(), 0);
  json r;
  c->annotate(r);
  EXPECT_TRUE(std::isfinite(r.at("loss").get<double>()));
  c->teardown();
}

// On a GPU every case of ours has a device path now (the trainer with and without checkpointing, the
// K/V-cache decoder): none is made as a skip; each needs the device to set up (test_gpt2_suite_gpu).
TEST(Gpt2Suite, GpuCasesOfOursAreAllMade) {
  const bench::Suite& s = *bench::find_suite("gpt2");
  bench::SuiteOptions o = s.options(true, json{{"ckpt", {"off", "on"}}, {"op", {"train", "infer"}}});
  o.devices = {"cuda:0"};
  std::vector<std::string> names;
  for (const auto& c : s.expand(o)) names.push_back(c.id.name());
  ASSERT_EQ(names.size(), 4u) << ::testing::PrintToString(names);  // train, train ckpt=on, prefill, decode
  EXPECT_EQ(std::count_if(names.begin(), names.end(), [](const std::string& n) { return n.find("/cuda:0/") != std::string::npos; }), 4);
  EXPECT_EQ(std::count_if(names.begin(), names.end(), [](const std::string& n) { return n.find("ckpt=on") != std::string::npos; }), 1);
}

// --cuda-graph: beside ours' GPU training case in fp32 and tf32, the same step replayed from a CUDA
// graph (cuda_graph=true; its table row says so); none in bf16 / fp16 (the trainer refuses graphs
// there), none on the CPU, none for the peers or the K/V-cache decoder.
TEST(Gpt2Suite, CudaGraphRowsBesideOursGpuSteps) {
  const bench::Suite& s = *bench::find_suite("gpt2");
  bench::SuiteOptions o = s.options(true, json{{"dtype", {"fp32", "tf32", "bf16"}}, {"impl", {"ours", "pytorch"}},
                                               {"op", {"train", "infer"}}});
  o.devices = {"cpu", "cuda:0"};
  o.extra["cuda_graph"] = true;
  std::vector<std::string> graphs;
  for (const auto& c : s.expand(o))
    if (c.id.name().find("cuda_graph=true") != std::string::npos) graphs.push_back(c.id.name());
  ASSERT_EQ(graphs.size(), 2u) << ::testing::PrintToString(graphs);
  for (const auto& n : graphs) {
    EXPECT_NE(n.find("gpt2/train/cuda:0/"), std::string::npos) << n;
    EXPECT_NE(n.find("impl=ours"), std::string::npos) << n;
  }
  const json eager{{"op", "train"}, {"device", "cuda:0"}, {"config", "gpt-mini"}, {"impl", "ours"}, {"batch", 1},
                   {"seq", 32}, {"gflops", 10.0}, {"flops_per_token", 1e6}, {"tokens_per_iteration", 32.0}};
  json graph = eager;
  graph["cuda_graph"] = true;
  std::ostringstream out;
  s.summarize({eager, graph}, out);
  EXPECT_NE(out.str().find(" ours, CUDA graph |"), std::string::npos) << out.str();
}

// --dtype fp32,tf32,bf16,fp16: ours gets a case per dtype, named by it; on the CPU tf32 / fp16 skip
// with the reason (the GEMM autocast is the GPU trainer's), bf16 is the CPU's AMP step; the peers run
// fp32, and PyTorch bf16 too (torch.autocast) on either device.
TEST(Gpt2Suite, DtypeAxisNamesOursPerDtypeAndSkipsWhatTheCpuCannotRun) {
  const bench::Suite& s = *bench::find_suite("gpt2");
  bench::SuiteOptions o = s.options(true, json{{"dtype", {"fp32", "tf32", "bf16", "fp16"}}, {"impl", {"ours", "pytorch"}}});
  o.devices = {"cpu", "cuda:0"};
  int skipped = 0, peers = 0, gpu = 0, cpu_bf16 = 0;
  for (const auto& c : s.expand(o)) {
    const std::string name = c.id.name();
    const bool peer = name.find("impl=pytorch") != std::string::npos;
    if (c.id.dtype != "fp32" && !(peer && c.id.dtype == "bf16")) {
      EXPECT_NE(name.find("impl=ours"), std::string::npos) << name;
    }
    if (peer) ++peers;
    if (c.id.device != "cpu") {
      ++gpu;
      continue;  // the trainer's cases: they need the GPU to set up
    }
    if (c.id.dtype == "fp32" || peer) continue;
    if (c.id.dtype == "bf16") {
      ++cpu_bf16;  // set up and verified in OursBf16OnTheCpu... below
      continue;
    }
    try {
      c.make()->setup();
      ADD_FAILURE() << name << " set up on the CPU";
    } catch (const Unsupported& e) {
      ++skipped;
      EXPECT_NE(std::string(e.what()).find("fp32 and bf16"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(skipped, 2);   // cpu tf32, fp16
  EXPECT_EQ(cpu_bf16, 1);  // ours
  EXPECT_EQ(peers, 4);     // cpu and cuda:0, fp32 and bf16 (autocast)
  EXPECT_EQ(gpu, 6);       // ours fp32, tf32, bf16, fp16 and the peer fp32, bf16
}

// Ours in bf16 on the CPU (the AmpTrainer step, PyTorch's autocast policy) verifies against the fp32
// step, trains, profiles layer by layer, and says how it computed bf16: emulated (AVX2) and, where
// the CPU has avx512_bf16, natively.
TEST(Gpt2Suite, OursBf16OnTheCpuVerifiesAgainstTheFp32StepAndProfiles) {
  const bench::Suite& s = *bench::find_suite("gpt2");
  bench::SuiteOptions o = s.options(true, json{{"dtype", {"bf16"}}});
  o.devices = {"cpu"};
  const auto cases = s.expand(o);
  ASSERT_EQ(cases.size(), 1u);
  for (const cpu::Isa isa : {cpu::Isa::avx2, cpu::Isa::avx512_bf16}) {
    if (int(isa) > int(cpu::isa_cap())) continue;
    cpu::IsaLimit lim(isa);
    SCOPED_TRACE(std::string("isa ") + cpu::isa_name(isa));
    const bool native = models::bf16_compute_native();
    auto c = cases[0].make();
    c->setup();
    const auto v = c->verify();
    EXPECT_TRUE(v.ok) << v.message;
    EXPECT_EQ(v.tolerance, 1.0);  // error / autocast tolerance (the fp32 row's is 1e-5 against fp64)
    EXPECT_GT(v.max_rel_err, 0.0) << "no bf16 rounding seen";
    c->run();
    bench::ProfileResult p;
    ASSERT_TRUE(c->profile(p));
    EXPECT_TRUE(p.verified) << p.max_rel_err;
    std::set<std::string> names;
    for (const auto& r : p.regions) names.insert(r.name);
    for (const char* n : {"step", "loss", "optimizer", "forward wte", "backward h.0.mlp.c_fc", "forward ln_f"})
      EXPECT_TRUE(names.count(n)) << n;
    json r;
    c->annotate(r);
    EXPECT_TRUE(std::isfinite(r.at("loss").get<double>()));
    EXPECT_EQ(r.at("bf16_compute"), native ? "native" : "emulated");
    c->teardown();
  }
}

// --attn flash,unfused: a case of ours per core, the unfused one named so and running that core.
TEST(Gpt2Suite, AttnAxisNamesAndRunsTheUnfusedCore) {
  const bench::Suite& s = *bench::find_suite("gpt2");
  bench::SuiteOptions o = s.options(true, json{{"attn", {"flash", "unfused"}}});
  o.devices = {"cpu"};
  const auto cases = s.expand(o);
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(cases[0].id.name().find("attn="), std::string::npos) << cases[0].id.name();
  EXPECT_NE(cases[1].id.name().find("/attn=unfused"), std::string::npos) << cases[1].id.name();
  auto c = cases[1].make();
  c->setup();
  c->run();
  json r;
  c->annotate(r);
  EXPECT_EQ(r.at("attn"), "unfused");
  EXPECT_TRUE(std::isfinite(r.at("loss").get<double>()));
  c->teardown();
}

// Ours against PyTorch eager (bench/gpt2_tables.h): the ratio of the medians, and each repetition
// paired with the peer's of the same round, on ours' entries at the same point only (another dtype,
// sequence length or the compiled peer is not a partner); the table prints "median (range)".
TEST(Gpt2Suite, OursAgainstPyTorchEagerPairsTheRepetitionsOfARound) {
  auto entry = [](const std::string& impl, const std::string& dtype, int seq, int rep, double us, bool median = false) {
    json e{{"suite", "gpt2"}, {"op", "train"}, {"device", "cpu"}, {"dtype", dtype}, {"config", "gpt2-124m"}, {"batch", 4},
           {"seq", seq},      {"impl", impl},  {"real_time", us},  {"repetitions", 3}, {"flops_per_token", 1e9}};
    e["run_name"] = "gpt2/" + impl + "/" + dtype + "/" + std::to_string(seq);
    if (median) e["run_type"] = "aggregate", e["aggregate_name"] = "median";
    else e["run_type"] = "iteration", e["repetition_index"] = rep;
    e["gflops"] = 256 * 1e9 / us * 1e6 * 1e-9;
    return e;
  };
  std::vector<json> es;
  const double ours[] = {1000, 1100, 1050}, peer[] = {2100, 2000, 2400};
  for (int k = 0; k < 3; ++k) {
    es.push_back(entry("ours", "fp32", 64, k, ours[k]));
    es.push_back(entry("pytorch", "fp32", 64, k, peer[k]));
    es.push_back(entry("pytorch-compile", "fp32", 64, k, 500));  // not eager: no partner
    es.push_back(entry("ours", "bf16", 64, k, 700));             // no bf16 peer row: nothing
    es.push_back(entry("ours", "fp32", 256, k, 4000));           // no peer at seq 256: nothing
  }
  es.push_back(entry("ours", "fp32", 64, 0, 1050, true));
  es.push_back(entry("pytorch", "fp32", 64, 0, 2100, true));
  es.push_back(entry("ours", "bf16", 64, 0, 700, true));
  bench::find_suite("gpt2")->derive(es);
  int with = 0;
  for (const json& e : es) {
    if (!e.contains("speedup_vs_pytorch")) continue;
    ++with;
    ASSERT_EQ(e.at("impl"), "ours");
    ASSERT_EQ(e.at("dtype"), "fp32");
    ASSERT_EQ(e.at("seq"), 64);
    if (e.value("aggregate_name", "") == "median") {
      EXPECT_DOUBLE_EQ(e.at("speedup_vs_pytorch").get<double>(), 2.1);  // the pairs' median (medians' ratio: 2.0)
      EXPECT_DOUBLE_EQ(e.at("speedup_vs_pytorch_range")[0].get<double>(), 2000.0 / 1100);
      EXPECT_DOUBLE_EQ(e.at("speedup_vs_pytorch_range")[1].get<double>(), 2400.0 / 1050);
    } else {
      const int k = e.at("repetition_index");
      EXPECT_DOUBLE_EQ(e.at("speedup_vs_pytorch").get<double>(), peer[k] / ours[k]);
    }
  }
  EXPECT_EQ(with, 4);  // ours fp32 seq 64: three repetitions and the median
  std::vector<json> records;
  for (const json& e : es)
    if (e.value("aggregate_name", "") == "median") records.push_back(e);
  std::ostringstream table;
  bench::find_suite("gpt2")->summarize(records, table);
  EXPECT_NE(table.str().find("2.10x (1.82-2.29)"), std::string::npos) << table.str();
}
