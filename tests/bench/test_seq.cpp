// Suite seq (bench/seq.cpp): its axes expand into the cases asked for (oneDNN only for the recurrent
// models, the image models only for op=infer, the peer's beside ours), and its cases run end to end
// at tiny sizes: a training epoch verified against the fp64 reference, a forward-only latency
// case with p50 / p99; sizes that do not fit are bad usage; --dataset text:FILE trains on a file's
// characters (its alphabet the vocabulary), the peer on the same batches where torch imports
// (tests/test_seq_parity.cpp checks the peer's arithmetic).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
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

// impl=cudnn (cuDNN's RNN API) is a GPU row of rnn and lstm, impl=onednn a CPU row; ours runs on both.
TEST(SeqSuite, CudnnRowsOnTheGpuOnly) {
  const bench::Suite& s = *bench::find_suite("seq");
  bench::SuiteOptions o = s.options(true, {{"op", {"train"}}});
  o.devices = {"cpu", "cuda:0"};  // expanding needs no device
  const auto cs = s.expand(o);
  EXPECT_EQ(count(cs, "impl=cudnn"), 4);  // rnn and lstm x batch 1, 8
  EXPECT_EQ(count(cs, "train/cuda:0/fp32/model=lstm/impl=cudnn"), 2);
  EXPECT_EQ(count(cs, "train/cpu/fp32/model=rnn/impl=cudnn"), 0);
  EXPECT_EQ(count(cs, "model=transformer/impl=cudnn"), 0);
  EXPECT_EQ(count(cs, "train/cuda:0/fp32/model=rnn/impl=onednn"), 0);
  EXPECT_EQ(count(cs, "train/cuda:0/fp32/model=transformer/impl=ours"), 2);
  EXPECT_THROW(expand(true, {{"impl", {"cudnn_v9"}}}), UsageError);
}

// op=infer on a GPU (bench/seq_infer.cpp): a row of ours for every model of the zoo and cuDNN's for
// rnn and lstm; where the GPU trainer cannot be made (no device, a CPU-only build) each case's setup
// is a skip with the reason (Unsupported), never an error. With a GPU they set up (their checks run
// in tests/models/test_infer_gpu.cu).
TEST(SeqSuite, InferRowsOnAGpuSkipWithTheReasonWithoutOne) {
  const bench::Suite& s = *bench::find_suite("seq");
  bench::SuiteOptions o = s.options(false, {{"op", {"infer"}}, {"infer_batch", {1}}});
  o.devices = {"cuda:0"};
  const auto cs = s.expand(o);
  EXPECT_EQ(count(cs, "infer/cuda:0/fp32/"), 9);  // 7 models of ours + rnn and lstm of cuDNN
  EXPECT_EQ(count(cs, "impl=cudnn"), 2);
  EXPECT_EQ(count(cs, "impl=onednn"), 0);
  int skipped = 0;
  for (const auto& spec : cs) {
    auto c = spec.make();
    try {
      c->setup();
      c->teardown();
    } catch (const Unsupported& e) {
      ++skipped;
      EXPECT_NE(std::string(e.what()).find("the GPU trainer refuses"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(skipped == 0 || skipped == int(cs.size())) << skipped << " of " << cs.size() << " skipped";
}

// --cuda-graph, op=infer: beside each GPU case of ours and cuDNN's, the same call from a CUDA graph
// (cuda_graph=true); none on the CPU. op=train: beside each GPU case of ours (not cuDNN's RNN, whose
// weight space the host refills per step), the same epoch with its steps replayed. The tables get
// the graph's p50 and tokens/s columns from such records.
TEST(SeqSuite, CudaGraphRowsBesideTheGpuCases) {
  const bench::Suite& s = *bench::find_suite("seq");
  bench::SuiteOptions o = s.options(true, {{"op", {"infer"}}, {"infer_batch", {1}}, {"model", {"rnn", "mlp"}}});
  o.devices = {"cpu", "cuda:0"};
  o.extra["cuda_graph"] = true;
  const auto cs = s.expand(o);
  EXPECT_EQ(count(cs, "/cuda_graph=true"), 3);  // rnn ours and cudnn, mlp ours, on cuda:0
  EXPECT_EQ(count(cs, "infer/cpu/"), 3);         // rnn ours, onednn; mlp: no graph rows
  EXPECT_EQ(count(cs, "infer/cpu/fp32/model=rnn/impl=ours/batch=1/seq=8/vocab=32/emb=16/hidden=32/layers=1/cuda_graph"), 0);
  bench::SuiteOptions t = s.options(true, {{"op", {"train"}}, {"batch", {8}}, {"model", {"rnn", "lstm", "transformer"}}});
  t.devices = {"cpu", "cuda:0"};
  t.extra["cuda_graph"] = true;
  const auto ct = s.expand(t);
  EXPECT_EQ(count(ct, "/cuda_graph=true"), 3);  // ours of each model on cuda:0 (the transformer's skips in setup)
  EXPECT_EQ(count(ct, "impl=cudnn/"), 2);      // rnn, lstm, eager only
  EXPECT_EQ(count(ct, "train/cpu/"), 5);         // ours x 3, onednn x 2: no graph rows
  const json eager{{"op", "infer"}, {"model", "rnn"}, {"impl", "ours"}, {"device", "cuda:0"}, {"batch", 1}, {"p50_ms", 0.5}};
  json graph = eager;
  graph["cuda_graph"] = true, graph["p50_ms"] = 0.125;
  const json teager{{"op", "train"}, {"model", "lstm"}, {"impl", "ours"}, {"device", "cuda:0"}, {"batch", 8},
                    {"seq", 32}, {"tokens_per_s", 1000.0}};
  json tgraph = teager;
  tgraph["cuda_graph"] = true, tgraph["tokens_per_s"] = 4321.0;
  std::ostringstream out;
  s.summarize({eager, graph, teager, tgraph}, out);
  EXPECT_NE(out.str().find("CUDA graph p50"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("0.125"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("0.500"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("| CUDA graph "), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("4321"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("1000"), std::string::npos) << out.str();
}

TEST(SeqSuite, SizesThatDoNotFitAreBadUsage) {
  EXPECT_THROW(expand(true, {{"d_model", {10}}, {"heads", {4}}}), UsageError);
  EXPECT_THROW(expand(true, {{"model", {"rnn"}}, {"layers", {2}}}), UsageError);
  EXPECT_THROW(expand(true, {{"vocab", {1}}}), UsageError);
}

namespace {
// A case made, set up, verified, run once and annotated (as after a 1 ms timing): its record, with
// its work's items as "work_items".
json run_case(const bench::CaseSpec& spec) {
  SCOPED_TRACE(spec.id.name());
  auto c = spec.make();
  c->setup();
  const auto v = c->verify();
  EXPECT_TRUE(v.ok) << v.message;
  EXPECT_GE(c->run(), 0);
  json r = {{"real_time", 1000.0}};
  c->annotate(r);
  r["work_items"] = c->work().items;
  c->teardown();
  return r;
}
}  // namespace

TEST(SeqSuite, TrainingEpochsRunAndVerify) {
  json over = tiny();
  over["op"] = {"train"};
  for (const auto& spec : expand(true, over)) {
    const json r = run_case(spec);
    const int tokens_per_sample = 4;  // seq
    EXPECT_EQ(r.at("work_items"), 2 * 2 * tokens_per_sample);  // ceil(4 samples / batch 2) steps of 2
    EXPECT_TRUE(std::isfinite(r.at("mean_loss").get<double>()));
    EXPECT_GT(r.at("flops").get<double>(), 0);
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

namespace {
// A UTF-8 text file in a fresh folder, removed with it.
struct TextFile {
  std::filesystem::path dir, path;
  explicit TextFile(const std::string& text) {
    dir = std::filesystem::temp_directory_path() / ("dlb-test-seq-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    path = dir / "tiny.txt";
    std::ofstream(path, std::ios::binary) << text;
  }
  ~TextFile() { std::filesystem::remove_all(dir); }
  std::string spec() const { return "text:" + path.string(); }
};
// 6 distinct characters (a b c, space, é, ∑), two of them multi-byte (é: 2 bytes, ∑: 3 bytes).
const std::string kText = "abc é∑ abc é∑ cab ∑é bca é∑ abc é∑ cab ∑é bca é∑ abc";
}  // namespace

TEST(SeqSuite, TextDatasetTrainsOnTheFilesCharacters) {
  TextFile f(kText);
  json over = tiny();
  over.erase("vocab");  // the file's alphabet sets it
  over["op"] = {"train", "infer"};
  over["impl"] = {"ours"};
  const bench::Suite& s = *bench::find_suite("seq");
  bench::SuiteOptions o = s.options(true, over);
  o.devices = {"cpu"};
  o.extra["dataset"] = f.spec();
  const auto cs = s.expand(o);
  ASSERT_EQ(count(cs, "vocab=6/dataset=text:tiny.txt"), int(cs.size()) - 1);  // all but mlp's infer case
  for (const auto& spec : cs) {
    if (spec.id.name().find("mlp") == std::string::npos) {
      EXPECT_EQ(run_case(spec).at("dataset"), "text:tiny.txt");
    }
  }
  // Several datasets interleave in one run: synthetic (unnamed in the ids) beside the file's.
  o.extra["dataset"] = "synthetic," + f.spec();
  const auto both = s.expand(o);
  EXPECT_EQ(both.size(), 2 * cs.size() - 1);  // mlp's infer case once
  EXPECT_EQ(count(both, "dataset=text:tiny.txt"), int(cs.size()) - 1);
  o.extra["dataset"] = f.spec() + "," + f.spec();
  EXPECT_THROW(s.expand(o), UsageError);
  o.extra["dataset"] = f.spec();
  // A vocabulary given must hold the alphabet; a larger one is kept.
  o.axes["vocab"] = {5}, o.given.push_back("vocab");
  EXPECT_THROW(s.expand(o), InputError);
  o.axes["vocab"] = {40};
  EXPECT_EQ(count(s.expand(o), "vocab=40/dataset=text:tiny.txt"), int(cs.size()) - 1);
}

TEST(SeqSuite, ThePeerTrainsOnOurTextBatches) {
  // Where torch imports (DLBENCH_PEER_PYTHON): the peer's epoch runs on the batches we hand it, and
  // the file is gone after the case. Elsewhere the peer reports itself unavailable: SKIPPED.
  TextFile f(kText);
  json over = tiny();
  over.erase("vocab");
  over["op"] = {"train"};
  over["model"] = {"lstm"};
  over["batch"] = {2};
  const bench::Suite& s = *bench::find_suite("seq");
  bench::SuiteOptions o = s.options(true, over);
  o.devices = {"cpu"};
  o.extra["dataset"] = f.spec();
  o.extra["peer"] = "pytorch";
  for (const auto& spec : s.expand(o)) {
    if (spec.id.name().find("impl=pytorch") == std::string::npos) continue;
    auto c = spec.make();
    try {
      c->setup();
    } catch (const Unsupported& e) {
      GTEST_SKIP() << "no PyTorch peer here: " << e.what();
    }
    const auto tmp = std::filesystem::temp_directory_path();
    auto files = [&] {
      int n = 0;
      for (const auto& e : std::filesystem::directory_iterator(tmp))
        n += e.path().filename().string().rfind("dlb-seq-" + std::to_string(::getpid()) + "-", 0) == 0;
      return n;
    };
    EXPECT_EQ(files(), 1);
    const auto v = c->verify();
    EXPECT_TRUE(v.ok) << v.message;
    json r;
    c->annotate(r);
    c->teardown();
    EXPECT_EQ(files(), 0);
  }
}

// The training table's "ours / PyTorch": ours' tokens/s over the peer's, paired round by round
// (bench/paired.h), at the same model, device, batch, seq and dataset; a CUDA-graph row of ours is
// no partner's (the peer has none).
TEST(SeqSuite, OursOverPyTorchIsPairedByRound) {
  auto entry = [](const std::string& impl, int rep, double tps, bool median = false, bool graph = false) {
    json e{{"suite", "seq"}, {"op", "train"}, {"device", "cpu"}, {"dtype", "fp32"}, {"model", "lstm"}, {"batch", 8},
           {"seq", 32},      {"impl", impl},  {"tokens_per_s", tps}, {"real_time", 1e6 / tps}, {"repetitions", 2}};
    e["run_name"] = "seq/" + impl + (graph ? "/graph" : "");
    if (graph) e["cuda_graph"] = true;
    if (median) e["run_type"] = "aggregate", e["aggregate_name"] = "median";
    else e["run_type"] = "iteration", e["repetition_index"] = rep;
    return e;
  };
  std::vector<json> es{entry("ours", 0, 3000), entry("ours", 1, 3300),     entry("pytorch", 0, 1000),
                       entry("pytorch", 1, 1500), entry("ours", 0, 9000, false, true), entry("ours", 0, 3150, true),
                       entry("pytorch", 0, 1250, true)};
  bench::find_suite("seq")->derive(es);
  EXPECT_DOUBLE_EQ(es[0].at("speedup_vs_pytorch").get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(es[1].at("speedup_vs_pytorch").get<double>(), 2.2);
  EXPECT_FALSE(es[4].contains("speedup_vs_pytorch"));  // the graph row
  // The pairs' median (3.0 and 2.2), inside their range, though ours' median (as after extra
  // repetitions of a noisy case) over the peer's is 3150 / 1250 = 2.52.
  EXPECT_DOUBLE_EQ(es[5].at("speedup_vs_pytorch").get<double>(), 2.6);
  EXPECT_DOUBLE_EQ(es[5].at("speedup_vs_pytorch_range")[0].get<double>(), 2.2);
  std::ostringstream table;
  bench::find_suite("seq")->summarize({es[5], es[6]}, table);
  EXPECT_NE(table.str().find("2.60x (2.20-3.00)"), std::string::npos) << table.str();
}
