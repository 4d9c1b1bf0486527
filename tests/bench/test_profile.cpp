// --profile pieces without the CLI: the model's region hook (models/profiler.h through
// Model::forward_backward), the CPU trainer's profiled step, and the Chrome trace and per-layer
// summary built from regions (bench/profile.h).
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "bench/profile.h"
#include "bench/suite.h"
#include "kernels/cpu/conv2d/conv2d.h"
#include "models/data.h"
#include "models/net.h"
#include "models/trainer.h"

using namespace dlb;
using nlohmann::json;

namespace {

models::Dataset small_data(int n) {
  models::Split s = models::synthetic_cifar10(std::size_t(n), 0, 0);
  return std::move(s.train);
}

// The regions of one profiled CPU training step of Net(16) at batch 4 (its loss in *loss).
std::vector<models::Region> profiled_net_step(float* loss = nullptr) {
  auto m = models::make_net(16);
  m->init(0);
  const auto d = small_data(8);
  auto t = models::make_trainer(*m, models::default_optimizer("net128"), models::TrainOptions{});
  models::WallProfiler p;
  const float l = t->profile_step(d, 4, p);
  if (loss) *loss = l;
  return p.regions();
}

}  // namespace

TEST(Profile, TrainerStepHasARegionPerLayerAndDirection) {
  float loss = 0;
  const auto rs = profiled_net_step(&loss);
  EXPECT_TRUE(std::isfinite(loss));
  ASSERT_FALSE(rs.empty());
  EXPECT_EQ(rs.front().name, "step");
  EXPECT_EQ(rs.front().depth, 0);
  std::set<std::string> names;
  for (const auto& r : rs) {
    names.insert(r.name);
    EXPECT_GE(r.dur_us, 0.0) << r.name;
    if (r.depth > 0) {  // nested inside the step
      EXPECT_GE(r.start_us, rs.front().start_us) << r.name;
      EXPECT_LE(r.start_us + r.dur_us, rs.front().start_us + rs.front().dur_us + 1e-3) << r.name;
    }
  }
  for (const char* n : {"data copy", "zero_grad", "forward", "loss", "backward", "optimizer", "forward conv1",
                        "backward conv1", "forward conv2", "backward conv2", "forward fc1", "backward fc1",
                        "forward fc3", "backward fc3", "forward relu1+pool1", "backward relu1+pool1"})
    EXPECT_TRUE(names.count(n)) << "no region " << n;
  // Forward regions carry the layer's FLOPs; backward twice that except the first layer (once).
  double fw1 = 0, bw1 = 0, fw2 = 0, bw2 = 0;
  for (const auto& r : rs) {
    if (r.name == "forward conv1") fw1 = r.flops;
    if (r.name == "backward conv1") bw1 = r.flops;
    if (r.name == "forward conv2") fw2 = r.flops;
    if (r.name == "backward conv2") bw2 = r.flops;
  }
  EXPECT_GT(fw1, 0);
  EXPECT_DOUBLE_EQ(bw1, fw1);
  EXPECT_DOUBLE_EQ(bw2, 2 * fw2);
}

// Every conv region names the conv table's rows that ran (the plan's choice at this CPU's ISA level),
// each a real row name; the summary carries them per layer; layers without a kernel choice name none.
TEST(Profile, ConvRegionsNameTheKernelsThatRan) {
  const auto regions = profiled_net_step();
  std::set<std::string> rows;
  for (int a = int(cpu::Algo::auto_) + 1; a < int(cpu::Algo::count_); ++a) rows.insert(cpu::algo_name(cpu::Algo(a)));
  int named = 0;
  for (const auto& r : regions) {
    if (r.layer.rfind("conv", 0) != 0 || r.layer.find("conv", 1) != std::string::npos) continue;
    ASSERT_FALSE(r.algo.empty()) << r.name;
    std::size_t at = 0;
    while (at <= r.algo.size()) {  // "a+b|c": every piece a row of the table
      const std::size_t e = std::min(r.algo.find_first_of("+|", at), r.algo.size());
      EXPECT_TRUE(rows.count(r.algo.substr(at, e - at))) << r.name << ": " << r.algo;
      at = e + 1;
    }
    ++named;
  }
  EXPECT_EQ(named, 4);  // conv1 and conv2, forward and backward
  for (const auto& r : regions)
    if (r.layer.rfind("fc", 0) == 0) {
      EXPECT_EQ(r.algo, "") << r.name;
    }
  bench::ProfileResult pr;
  pr.regions = regions;
  const json s = bench::profile_summary(pr);
  bool conv1 = false;
  for (const auto& row : s["rows"])
    if (row["region"] == "conv1") {
      conv1 = true;
      EXPECT_TRUE(row.contains("forward_algo") && row.contains("backward_algo")) << row.dump();
    }
  EXPECT_TRUE(conv1);
}

TEST(Profile, ProfiledStepEqualsUnprofiledStep) {
  const auto d = small_data(8);
  auto a = models::make_net(16), b = models::make_net(16);
  a->init(0);
  b->init(0);
  auto ta = models::make_trainer(*a, models::default_optimizer("net128"), models::TrainOptions{});
  auto tb = models::make_trainer(*b, models::default_optimizer("net128"), models::TrainOptions{});
  models::WallProfiler p;
  const float la = ta->profile_step(d, 4, p);
  const float lb = tb->gradients(models::Batch{d.images.data(), d.labels.data(), nullptr, 4});
  EXPECT_FLOAT_EQ(la, lb);
  auto pa = a->params(), pb = b->params();
  for (std::size_t i = 0; i < pa.size(); ++i)
    for (std::size_t j = 0; j < pa[i]->size(); ++j) ASSERT_FLOAT_EQ(pa[i]->grad[j], pb[i]->grad[j]) << pa[i]->name;
}

TEST(Profile, TraceAndSummaryFromRegions) {
  bench::ProfileResult r;
  r.device = "cpu";
  r.verified = true;
  auto add = [&](const char* name, const char* cat, const char* layer, int depth, double t, double dur, double flops) {
    models::Region g;
    g.name = name, g.cat = cat, g.layer = layer, g.depth = depth, g.start_us = t, g.dur_us = dur, g.flops = flops;
    g.clock = "wall";
    r.regions.push_back(g);
  };
  add("step", "step", "", 0, 0, 1000, 0);
  add("data copy", "copy", "", 1, 0, 100, 0);
  add("forward", "phase", "", 1, 100, 300, 0);
  add("forward fc1", "forward", "fc1", 2, 100, 300, 3e6);
  add("loss", "loss", "", 1, 400, 100, 0);
  add("backward", "phase", "", 1, 500, 400, 0);
  add("backward fc1", "backward", "fc1", 2, 500, 400, 6e6);
  const json s = bench::profile_summary(r);
  EXPECT_DOUBLE_EQ(s["step_ms"].get<double>(), 1.0);
  const auto& rows = s["rows"];
  ASSERT_EQ(rows.size(), 4u);  // data copy, fc1, loss, unaccounted
  EXPECT_EQ(rows[1]["region"], "fc1");
  EXPECT_DOUBLE_EQ(rows[1]["forward_ms"].get<double>(), 0.3);
  EXPECT_DOUBLE_EQ(rows[1]["backward_ms"].get<double>(), 0.4);
  EXPECT_DOUBLE_EQ(rows[1]["pct_of_step"].get<double>(), 70.0);
  EXPECT_NEAR(rows[1]["gflops"].get<double>(), 9e6 / 0.7e-3 * 1e-9, 1e-9);
  EXPECT_EQ(rows[3]["region"], "unaccounted");
  EXPECT_NEAR(rows[3]["ms"].get<double>(), 0.1, 1e-12);

  const json t = bench::chrome_trace("suite/op/cpu/fp32/batch=2", r);
  int complete = 0;
  for (const auto& e : t["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph"));
    if (e["ph"] == "X") {
      ++complete;
      EXPECT_TRUE(e["ts"].is_number());
      EXPECT_TRUE(e["dur"].is_number());
      EXPECT_EQ(e["pid"], 1);
    }
  }
  EXPECT_EQ(complete, 7);
}

TEST(Profile, TrainerStepCheckedAgainstAnUnprofiledStep) {
  auto m = models::make_net(16);
  m->init(0);
  const auto d = small_data(8);
  auto t = models::make_trainer(*m, models::default_optimizer("net128"), models::TrainOptions{});
  bench::ProfileResult r;
  ASSERT_TRUE(bench::profile_trainer_step(*t, *m, d, 4, "cpu", "test", r));
  EXPECT_TRUE(r.verified) << r.max_rel_err;
  EXPECT_LE(r.max_rel_err, 1e-5);
  EXPECT_EQ(r.device, "cpu");
  EXPECT_EQ(r.regions.front().clock, "wall");
}

// profile_cpu_step (the gpt2 and amp suites' CPU cases): the profiled step must give the unprofiled
// loss and gradients; a step that computes something else under the profiler is caught.
TEST(Profile, CpuStepIsCheckedAgainstItsUnprofiledGradients) {
  auto m = models::make_net(16);
  m->init(0);
  const auto d = small_data(4);
  const models::Batch b{d.images.data(), d.labels.data(), nullptr, 4};
  models::Optimizer opt(models::default_optimizer("net128"), m->params());
  bool planted = false;
  auto gradients = [&](models::Profiler* prof) -> double {
    m->zero_grad();
    m->set_profiler(prof);
    const double loss = m->forward_backward(b);
    m->set_profiler(nullptr);
    if (prof && planted) m->params().front()->grad[0] *= 1.001f;
    return loss;
  };
  for (const bool fault : {false, true}) {
    planted = fault;
    bench::ProfileResult r;
    ASSERT_TRUE(bench::profile_cpu_step(*m, gradients, [&] { opt.step(); }, r));
    EXPECT_EQ(r.verified, !fault) << r.max_rel_err;
    EXPECT_EQ(r.device, "cpu");
    std::set<std::string> names;
    for (const auto& g : r.regions) names.insert(g.name);
    for (const char* n : {"step", "optimizer", "loss", "forward conv1", "backward conv1"}) EXPECT_TRUE(names.count(n)) << n;
  }
}

// The amp suite's CPU train case profiles the step it times, fp32 and bf16 (it did not: --profile
// wrote nothing for CPU amp rows); the seq suite's CPU train cases their gradients (no optimizer).
TEST(Profile, AmpAndSeqSuitesCpuStepsHaveARegionPerLayer) {
  std::vector<bench::CaseSpec> cases;
  for (const auto& [suite, over] : std::vector<std::pair<const char*, json>>{
           {"amp", {{"model", {"mlp"}}, {"batch", {4}}, {"dtype", {"fp32", "bf16"}}, {"parity_steps", {3}}, {"size", json::array()}}},
           {"seq", {{"model", {"lstm", "transformer"}}, {"op", {"train"}}, {"impl", {"ours"}}, {"batch", {2}}}}}) {
    const bench::Suite& s = *bench::find_suite(suite);
    bench::SuiteOptions o = s.options(true, over);
    o.devices = {"cpu"};
    for (auto& c : s.expand(o)) cases.push_back(std::move(c));
  }
  ASSERT_EQ(cases.size(), 4u);
  for (const auto& spec : cases) {
    SCOPED_TRACE(spec.id.name());
    auto c = spec.make();
    c->setup();
    const auto v = c->verify();
    EXPECT_TRUE(v.ok) << v.message;
    c->run();
    bench::ProfileResult p;
    ASSERT_TRUE(c->profile(p));
    EXPECT_TRUE(p.verified) << p.max_rel_err << " " << p.check;
    int forward = 0, backward = 0;
    std::set<std::string> names;
    for (const auto& r : p.regions) {
      names.insert(r.name);
      forward += r.cat == "forward" && !r.layer.empty();
      backward += r.cat == "backward" && !r.layer.empty();
    }
    EXPECT_EQ(names.count("optimizer"), spec.id.suite == "amp" ? 1u : 0u);
    EXPECT_TRUE(names.count("loss"));
    EXPECT_GE(forward, 3);  // mlp: three Linear layers; lstm: embedding, LSTM, head at least
    EXPECT_EQ(forward, backward);
    c->teardown();
  }
}
