// Suite "loader" and the training cases fed by the loader (bench/loader.cpp, bench/training_cases.cpp):
// the axes expand as declared (workers capped at the cores unless given, no mode without workers);
// real cases over a small synthetic set on disk (a data cache of the test's own) verify against the
// reference transform, time an epoch and record their stages; a lecture case fed by process workers
// trains an epoch and says which loader fed it, beside the resident row; a bad --loader is bad usage.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <thread>

#include "bench/suite.h"
#include "bench/training_cases.h"
#include "kernels/common/errors.h"
#include "tests/models/loader/loader_test_util.h"

using namespace dlb;
using loader_test::TempDir;

namespace {

// The synthetic sets go into a cache folder of this test's own.
const std::string& cache() {
  static TempDir dir;
  static const bool set = [] { return ::setenv("DLBENCH_DATA_CACHE", dir.str().c_str(), 1) == 0; }();
  (void)set;
  return dir.str();
}

bench::SuiteOptions options(const char* suite, bench::json overrides, bench::json extra = bench::json::object()) {
  cache();
  bench::SuiteOptions o = bench::find_suite(suite)->options(true, overrides);
  o.devices = {"cpu"};
  o.extra = std::move(extra);
  return o;
}

std::string param(const bench::CaseId& id, const std::string& key) {
  for (const auto& [k, v] : id.params)
    if (k == key) return v.is_string() ? v.get<std::string>() : v.dump();
  return "";
}

// setup, verify, two timed epochs, the record's extra keys.
bench::json run_case(const bench::CaseSpec& spec) {
  auto c = spec.make();
  c->setup();
  const CheckResult v = c->verify();
  EXPECT_TRUE(v.ok) << spec.id.name() << ": " << v.message;
  for (int i = 0; i < 2; ++i) EXPECT_GT(c->run(), 0.0);
  bench::json r = bench::json::object();
  c->annotate(r);
  EXPECT_GT(c->work().items, 0.0);
  c->teardown();
  return r;
}

TEST(LoaderSuite, WorkersStopAtTheCoresUnlessGivenAndNoModeWithoutWorkers) {
  const long long cores = std::max(1u, std::thread::hardware_concurrency());
  auto o = options("loader", {{"workers", {0, 1, 2, 4, 8, 16, 32, 64}}, {"mode", {"thread", "process"}}, {"decode", {"none"}}});
  o.given.clear();
  auto cases = bench::find_suite("loader")->expand(o);
  int inline_cases = 0;
  for (const auto& c : cases) {
    EXPECT_LE(std::stoll(param(c.id, "workers")), cores) << c.id.name();
    if (param(c.id, "workers") == "0") {
      ++inline_cases;
      EXPECT_EQ(param(c.id, "mode"), "inline");
    }
  }
  EXPECT_EQ(inline_cases, 1);
  o.given = {"workers"};  // a list given is run as given
  cases = bench::find_suite("loader")->expand(o);
  EXPECT_EQ(std::count_if(cases.begin(), cases.end(), [](const auto& c) { return param(c.id, "workers") == "64"; }), 2);
}

TEST(LoaderSuite, CasesVerifyAgainstTheReferenceAndRecordWhereTheTimeGoes) {
  auto o = options("loader", {{"workers", {0, 2}}, {"mode", {"process"}}, {"decode", {"none", "png"}}, {"pin", {"on"}},
                              {"augment", {"crop-flip"}}, {"images", {96}}, {"batch", {16}}});
  const auto cases = bench::find_suite("loader")->expand(o);
  ASSERT_EQ(cases.size(), 4u);
  for (const auto& spec : cases) {
    const bench::json r = run_case(spec);
    EXPECT_GT(r.at("cpu_us_per_img").get<double>(), 0.0) << spec.id.name();
    EXPECT_GE(r.at("first_batch_ms").get<double>(), 0.0);
    EXPECT_GT(r.at("stage_us_per_img").at("transform").get<double>(), 0.0);
    EXPECT_GT(r.at("stage_us_per_img").at("pin").get<double>(), 0.0);  // pin=on: the pin step ran
    if (param(spec.id, "decode") == "png") {
      EXPECT_GT(r.at("stage_us_per_img").at("decode").get<double>(), 0.0);
    }
    EXPECT_NE(r.at("dataset").get<std::string>().find(cache()), std::string::npos);
  }
}

TEST(LoaderSuite, LectureFedByProcessWorkersBesideTheResidentRow) {
  auto o = options("lecture", {{"batch", {16}}, {"images", {48}}}, {{"loader", "workers=2,mode=process"}});
  const auto cases = bench::find_suite("lecture")->expand(o);
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(param(cases[0].id, "fed_by"), "");
  EXPECT_EQ(param(cases[1].id, "fed_by"), "workers=2,mode=process");
  const bench::json resident = run_case(cases[0]), fed = run_case(cases[1]);
  EXPECT_EQ(resident.at("fed_by"), "resident");
  EXPECT_EQ(fed.at("fed_by"), "workers=2,mode=process");
  EXPECT_NE(fed.at("loader").get<std::string>().find("workers=2"), std::string::npos);
  EXPECT_TRUE(std::isfinite(fed.at("mean_loss").get<double>()));
  EXPECT_GE(fed.at("loader_wait_s_per_epoch").get<double>(), 0.0);
}

TEST(LoaderSuite, LoaderSpecOfAFeed) {
  auto o = options("lecture", {}, {{"loader", "lecture"}});
  auto f = bench::feed_of(o, "cpu");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->o.workers, 2);
  EXPECT_EQ(f->o.mode, models::loader::WorkerMode::process);
  EXPECT_FALSE(f->o.pin);
  EXPECT_TRUE(bench::feed_of(o, "cuda:0")->o.pin);  // a GPU's batches arrive pinned
  o.extra["loader"] = "lecture,pin=off";
  EXPECT_THROW(bench::feed_of(o, "cpu"), UsageError);  // a preset is a word or preset=...
  o.extra["loader"] = "preset=lecture,pin=off";
  EXPECT_FALSE(bench::feed_of(o, "cuda:0")->o.pin);
  o.extra["loader"] = "colour=red";
  EXPECT_THROW(bench::feed_of(o, "cpu"), UsageError);
  o.extra.erase("loader");
  EXPECT_FALSE(bench::feed_of(o, "cpu"));
}

TEST(LoaderSuite, TrainModelsOfAnotherShapeAreNotFed) {
  auto o = options("train", {{"model", {"mlp"}}, {"batch", {16}}, {"images", {32}}, {"input", {"pageable"}}},
                   {{"loader", "workers=0"}});
  const auto cases = bench::find_suite("train")->expand(o);
  ASSERT_EQ(cases.size(), 2u);
  auto c = cases[1].make();
  EXPECT_THROW(c->setup(), Unsupported);  // the loader has no resize: 3x32x32 is not the MLP's input
}

}  // namespace
