// Suite seq (bench/seq.cpp): its axes expand into the cases asked for (oneDNN only for the recurrent
// models, the image models only for op=infer, the peer's beside ours), and its cases run end to end
// at tiny sizes: a training epoch verified against the fp64 reference, a forward-only latency
// case with p50 / p99; sizes that do not fit are bad usage. The peer's cases run where torch is
// (tests/test_seq_parity.cpp checks the peer's arithmetic).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "bench/suite.h"
#include "kernels/common/errors.h"

using namespace dlb;
using bench::json;

namespace {
std::vector<bench::CaseSpec> expand(bool quick, json over, bool peer = false) {
  const bench::Suite& s = *bench::find_suite("seq");
  bench::SuiteOptions o = s.options(quick, over);
  o.devices = {"cpu"};
  if (peer) o.extra["peer"] = "pytorch";
  return s.expand(o);
}
json tiny() {
  return {{"seq", {4}}, {"vocab", {11}}, {"emb", {6}}, {"hidden", {8}}, {"d_model", {8}}, {"heads", {2}}, {"samples", {4}},
          {"batch", {2}}, {"infer_batch", {2}}};
}
int count(const std::vector<bench::CaseSpec>& cs, const std::string& part) {
  return int(std::count_if(cs.begin(), cs.end(), [&](const auto& c) { return c.id.name().find(part) != std::string::npos; }));
}
}  // namespace

TEST(SeqSuite, QuickExpandsTheCasesAsked) {
  const auto cs = expand(true, json::object());
  // train: rnn, lstm (ours, onednn) and transformer (ours) x batch 1, 8; infer: those and mlp x batch 1, 4
  EXPECT_EQ(count(cs, "seq/train/"), 10);
  EXPECT_EQ(count(cs, "seq/infer/"), 12);
  EXPECT_EQ(count(cs, "model=transformer/impl=onednn"), 0);
  EXPECT_EQ(count(cs, "train/cpu/fp32/model=mlp"), 0);  // image models train in suite train
  EXPECT_EQ(count(cs, "impl=pytorch"), 0);
  EXPECT_EQ(count(cs, "model=lstm/impl=ours/batch=8/seq=8/vocab=32/emb=16/hidden=32/layers=2"), 1);
  const auto with_peer = expand(true, {{"model", {"rnn"}}}, true);
  EXPECT_EQ(count(with_peer, "impl=pytorch"), 4);  // train and infer x 2 batches
}

TEST(SeqSuite, SizesThatDoNotFitAreBadUsage) {
  EXPECT_THROW(expand(true, {{"d_model", {10}}, {"heads", {4}}}), UsageError);
  EXPECT_THROW(expand(true, {{"model", {"rnn"}}, {"layers", {2}}}), UsageError);
  EXPECT_THROW(expand(true, {{"vocab", {1}}}), UsageError);
}

TEST(SeqSuite, TrainingEpochsRunAndVerify) {
  json over = tiny();
  over["op"] = {"train"};
  for (const auto& spec : expand(true, over)) {
    SCOPED_TRACE(spec.id.name());
    auto c = spec.make();
    c->setup();
    const auto v = c->verify();
    EXPECT_TRUE(v.ok) << v.message;
    EXPECT_GE(c->run(), 0);
    const int tokens_per_sample = 4;  // seq
    EXPECT_EQ(c->work().items, 2 * 2 * tokens_per_sample);  // ceil(4 samples / batch 2) steps of 2
    json r = {{"real_time", 1000.0}};
    c->annotate(r);
    EXPECT_TRUE(std::isfinite(r.at("mean_loss").get<double>()));
    EXPECT_GT(r.at("flops").get<double>(), 0);
    c->teardown();
  }
}

TEST(SeqSuite, InferenceLatencyOfEveryKindOfModel) {
  json over = tiny();
  over["op"] = {"infer"};
  over["model"] = {"rnn", "transformer", "mlp"};
  over["impl"] = {"ours"};
  const auto cs = expand(true, over);
  ASSERT_EQ(cs.size(), 3u);
  for (const auto& spec : cs) {
    SCOPED_TRACE(spec.id.name());
    auto c = spec.make();
    c->setup();
    const auto v = c->verify();
    EXPECT_TRUE(v.ok) << v.message;
    for (int i = 0; i < 3; ++i) EXPECT_GT(c->run(), 0);
    json r;
    c->annotate(r);
    EXPECT_EQ(r.at("latency_calls").get<int>(), 3);
    EXPECT_LE(r.at("p50_ms").get<double>(), r.at("p99_ms").get<double>());
    EXPECT_GT(c->work().flops, 0);
    c->teardown();
  }
}
