// Tests for harness/compare, baseline and history: verdicts from the fixture files
// (tests/data/compare), threshold logic, NEW/GONE/FAILED, flag parsing, bad input, verdict rates on
// simulated repetitions, per-machine baselines, and the step flag of the history.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>

#include <unistd.h>

#include "harness/baseline.h"
#include "harness/compare.h"
#include "harness/history.h"
#include "harness/results.h"
#include "kernels/common/errors.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace dlb::harness;

namespace {

const std::string kData = std::string(DLB_TEST_DATA_DIR) + "/compare/";

std::map<std::string, CaseComparison> by_name(const Comparison& c) {
  std::map<std::string, CaseComparison> m;
  for (const auto& k : c.cases) m[k.name] = k;
  return m;
}

Comparison fixture_comparison(double threshold = 0.05) {
  CompareOptions o;
  o.threshold = threshold;
  return compare_runs(load_results(kData + "base.json"), "base.json", load_results(kData + "new.json"), "new.json", o);
}

json fingerprint_context(const std::string& cpu, const std::string& date) {
  return {{"date", date},
          {"cpu", {{"model", cpu}}},
          {"openblas", {{"version", "0.3.21"}, {"core", "Haswell"}}},
          {"cuda", {{"gpus", json::array()}, {"runtime", "n/a"}, {"cublas", 0}, {"cudnn", 0}}},
          {"git", {{"sha", "abcdef0123456789"}, {"dirty", false}}}};
}

json iterations(const std::string& name, const std::vector<double>& times_us) {
  json a = json::array();
  for (std::size_t i = 0; i < times_us.size(); ++i)
    a.push_back({{"name", name}, {"run_name", name}, {"run_type", "iteration"}, {"repetition_index", i},
                 {"real_time", times_us[i]}, {"cpu_time", times_us[i]}, {"time_unit", "us"}, {"verified", true}});
  return a;
}

json doc_of(const json& context, const std::vector<json>& cases) {
  json b = json::array();
  for (const auto& c : cases)
    for (const auto& e : c) b.push_back(e);
  return {{"context", context}, {"benchmarks", b}};
}

CaseRun timed(const std::string& name, std::vector<double> t) {
  CaseRun r;
  r.name = name;
  r.times_us = t;
  std::sort(t.begin(), t.end());
  r.median_us = t.size() % 2 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
  double m = 0, s2 = 0;
  for (double x : t) m += x;
  m /= t.size();
  for (double x : t) s2 += (x - m) * (x - m);
  r.cv = t.size() > 1 ? std::sqrt(s2 / (t.size() - 1)) / m : 0;
  return r;
}

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    path = fs::temp_directory_path() / ("dlb-test-compare-" + tag + "-" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

void write_json(const fs::path& p, const json& j) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << j.dump(1);
}

}  // namespace

TEST(Compare, VerdictsFromFixtureFiles) {
  const Comparison c = fixture_comparison();
  const auto v = by_name(c);
  EXPECT_STREQ(verdict_name(v.at("fix/same").verdict), "SAME");
  EXPECT_STREQ(verdict_name(v.at("fix/slower").verdict), "SLOWER");
  EXPECT_NEAR(v.at("fix/slower").ratio, 1.2, 1e-12);
  EXPECT_NEAR(v.at("fix/slower").p, 2.0 / 252, 1e-12);
  EXPECT_TRUE(v.at("fix/slower").exact);
  EXPECT_STREQ(verdict_name(v.at("fix/faster").verdict), "FASTER");
  EXPECT_STREQ(verdict_name(v.at("fix/noisy").verdict), "NOISY");     // +8%, but p = 0.69
  EXPECT_STREQ(verdict_name(v.at("fix/failed").verdict), "FAILED");
  EXPECT_NE(v.at("fix/failed").note.find("verification failed"), std::string::npos);
  EXPECT_STREQ(verdict_name(v.at("fix/oom").verdict), "FAILED");      // timed in BASE, out of memory now
  EXPECT_STREQ(verdict_name(v.at("fix/gone").verdict), "GONE");
  EXPECT_STREQ(verdict_name(v.at("fix/new").verdict), "NEW");
  EXPECT_STREQ(verdict_name(v.at("fix/slight").verdict), "SAME");     // +3%, significant, within 5%
  EXPECT_STREQ(verdict_name(v.at("fix/units").verdict), "SAME");      // NEW in ns, BASE in us
  EXPECT_NEAR(v.at("fix/units").new_us, 50.0, 1e-9);
  EXPECT_EQ(v.count("fix/skipped"), 0u);                              // skipped in both: left out
  EXPECT_EQ(c.skipped_both, 1u);
  // Geometric mean over the 6 cases timed in both.
  EXPECT_EQ(c.shared, 6u);
  const double g = std::pow(1.002 * 1.2 * 0.8 * 1.08 * 1.03 * (50.0 / 50.0), 1.0 / 6);
  EXPECT_NEAR(c.geomean_ratio, g, 1e-9);
  // Exit 1: the slower case and the two failures, all named on the one stderr line.
  EXPECT_TRUE(c.regression());
  const std::string line = c.regression_line();
  for (const char* name : {"fix/slower (+20.0%)", "fix/failed", "fix/oom"}) EXPECT_NE(line.find(name), std::string::npos) << line;
  EXPECT_EQ(line.find("fix/noisy"), std::string::npos);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  // The JSON carries the same verdicts.
  const json j = comparison_json(c);
  EXPECT_TRUE(j.at("regression").get<bool>());
  EXPECT_EQ(j.at("cases").size(), c.cases.size());
}

TEST(Compare, ThresholdLogic) {
  // +3% with p = 0.008: SAME at 5%, SLOWER at 2%; +20%: SAME only when the threshold is above it.
  auto v = by_name(fixture_comparison(0.02));
  EXPECT_STREQ(verdict_name(v.at("fix/slight").verdict), "SLOWER");
  v = by_name(fixture_comparison(0.25));
  EXPECT_STREQ(verdict_name(v.at("fix/slower").verdict), "SAME");
  EXPECT_STREQ(verdict_name(v.at("fix/faster").verdict), "SAME");
  EXPECT_FALSE(v.at("fix/slower").fatal);

  CompareOptions o;
  const CaseRun base = timed("c", {100, 101, 99, 100.5, 99.5});
  const CaseRun plus10 = timed("c", {110, 111, 109, 110.5, 109.5}), plus20 = timed("c", {120, 121, 119, 120.5, 119.5});
  // +10%, significant: SLOWER beyond a 5% threshold; exactly at a 10% threshold it is not beyond.
  EXPECT_EQ(compare_case(&base, &plus10, o).verdict, Verdict::slower);
  o.threshold = 0.10;
  EXPECT_EQ(compare_case(&base, &plus10, o).verdict, Verdict::same);
  // A stricter alpha than 5 v 5 can reach (2/252 = 0.0079): never significant -> NOISY, with a note.
  o.threshold = 0.05;
  o.alpha = 0.005;
  const CaseRun plus20_overlap = timed("c", {120, 121, 119, 120.5, 100.2});  // not a clean shift either
  const auto k = compare_case(&base, &plus20_overlap, o);
  EXPECT_EQ(k.verdict, Verdict::noisy);
  EXPECT_NE(k.note.find("cannot reach"), std::string::npos) << k.note;
  // 3 v 3 (--quick) cannot reach p < 0.05 at all; a clean shift (every NEW repetition slower than
  // every BASE one by more than threshold + noise) is still SLOWER; an overlapping one is NOISY.
  o.alpha = 0.05;
  const CaseRun b3 = timed("c", {100, 101, 99}), n3 = timed("c", {150, 151, 149});
  const auto k3 = compare_case(&b3, &n3, o);
  EXPECT_EQ(k3.verdict, Verdict::slower);
  EXPECT_TRUE(k3.separated);
  EXPECT_TRUE(k3.fatal);
  EXPECT_EQ(compare_case(&n3, &b3, o).verdict, Verdict::faster);
  const CaseRun mixed3 = timed("c", {150, 100.5, 151});
  const auto km = compare_case(&b3, &mixed3, o);
  EXPECT_EQ(km.verdict, Verdict::noisy);
  EXPECT_NE(km.note.find("cannot reach"), std::string::npos) << km.note;
  // Separated, but by less than threshold + noise: +6% with 2% noise at a 5% threshold is not enough.
  const CaseRun b3n = timed("c", {98, 100, 102}), n3n = timed("c", {106.1, 108, 110});
  EXPECT_FALSE(compare_case(&b3n, &n3n, o).separated);
  EXPECT_EQ(compare_case(&b3n, &n3n, o).verdict, Verdict::noisy);
  // A noise band wider than the threshold makes SAME untrustworthy -> NOISY.
  const CaseRun wide_b = timed("c", {80, 120, 100, 90, 110}), wide_n = timed("c", {85, 118, 101, 92, 108});
  const auto w = compare_case(&wide_b, &wide_n, o);
  EXPECT_EQ(w.verdict, Verdict::noisy);
  EXPECT_GT(w.noise, 0.05);
}

TEST(Compare, NewGoneFailedSkipped) {
  CompareOptions o;
  const CaseRun t = timed("c", {100, 101, 99});
  EXPECT_EQ(compare_case(nullptr, &t, o).verdict, Verdict::added);
  EXPECT_EQ(compare_case(&t, nullptr, o).verdict, Verdict::gone);
  CaseRun f = t;
  f.state = CaseRun::State::failed;
  f.message = "verification failed";
  auto k = compare_case(&t, &f, o);
  EXPECT_EQ(k.verdict, Verdict::failed);
  EXPECT_TRUE(k.fatal);
  k = compare_case(nullptr, &f, o);  // failed in NEW, absent before: still a failure
  EXPECT_EQ(k.verdict, Verdict::failed);
  EXPECT_TRUE(k.fatal);
  k = compare_case(&f, &t, o);       // fixed: failed in BASE, timed now
  EXPECT_EQ(k.verdict, Verdict::added);
  EXPECT_FALSE(k.fatal);
  CaseRun s = t;
  s.state = CaseRun::State::skipped;
  s.message = "no CUDA device";
  k = compare_case(&t, &s, o);       // a GPU case on a CPU-only runner
  EXPECT_EQ(k.verdict, Verdict::gone);
  EXPECT_FALSE(k.fatal);
  CaseRun oom = t;
  oom.state = CaseRun::State::oom;
  EXPECT_TRUE(compare_case(&t, &oom, o).fatal);                // fit before, not now
  EXPECT_FALSE(compare_case(&oom, &oom, o).fatal);             // never fit here
  EXPECT_EQ(compare_case(&oom, &oom, o).verdict, Verdict::gone);

  // End to end from documents: a case only in BASE, one only in NEW, no regression.
  const json ctx = fingerprint_context("cpu A", "2026-01-01T00:00:00+0000");
  const json a = doc_of(ctx, {iterations("x", {10, 10.1, 9.9, 10, 10.05}), iterations("old", {5, 5, 5})});
  const json b = doc_of(ctx, {iterations("x", {10, 10.1, 9.9, 10, 10.02}), iterations("young", {7, 7, 7})});
  const Comparison c = compare_runs(a, "a", b, "b", o);
  const auto v = by_name(c);
  EXPECT_EQ(v.at("old").verdict, Verdict::gone);
  EXPECT_EQ(v.at("young").verdict, Verdict::added);
  EXPECT_EQ(v.at("x").verdict, Verdict::same);
  EXPECT_FALSE(c.regression());
  EXPECT_FALSE(c.different_machines);
  EXPECT_TRUE(compare_runs(a, "a", doc_of(fingerprint_context("cpu B", "2026-01-02T00:00:00+0000"), {}), "b", o)
                  .different_machines);
}

TEST(Compare, VerdictRatesOnSimulatedRuns) {
  // The verdict itself (not only the p-value), 2000 simulated comparisons each, fixed seeds:
  //   A/A at 5 vs 5: called SLOWER or FASTER <= 1% (cv 2%, cv 5%, and cv 2% with one repetition in
  //   five preempted to 1.5x);
  //   a 10% slowdown at 5 vs 5, cv 2%: SLOWER >= 95%;
  //   a 2x slowdown at 3 vs 3 (--quick; no rank test can reach p < 0.05 there): SLOWER, cv 2% and 5%.
  std::mt19937_64 rng(42);
  std::normal_distribution<double> z(0, 1);
  std::uniform_real_distribution<double> u(0, 1);
  auto reps = [&](double median, int n, double cv, double outlier_p = 0) {
    std::vector<double> v(static_cast<std::size_t>(n));
    for (auto& t : v) t = median * (1 + cv * z(rng)) * (u(rng) < outlier_p ? 1.5 : 1.0);
    return timed("c", v);
  };
  CompareOptions o;
  const int trials = 2000;
  struct Aa { double cv, outliers; };
  for (const Aa a : {Aa{0.02, 0}, Aa{0.05, 0}, Aa{0.02, 0.2}}) {
    int false_alarms = 0;
    for (int i = 0; i < trials; ++i) {
      const CaseRun b = reps(100, 5, a.cv, a.outliers), same = reps(100, 5, a.cv, a.outliers);
      const Verdict v = compare_case(&b, &same, o).verdict;
      false_alarms += v == Verdict::slower || v == Verdict::faster;
    }
    EXPECT_LE(false_alarms, trials / 100) << "A/A at cv " << a.cv << ", outliers " << a.outliers;
    std::printf("A/A 5 vs 5, cv %.0f%%, outliers %.0f%%: %d of %d called SLOWER/FASTER\n", 100 * a.cv, 100 * a.outliers,
                false_alarms, trials);
  }
  int caught = 0;
  for (int i = 0; i < trials; ++i) {
    const CaseRun b = reps(100, 5, 0.02), slow = reps(110, 5, 0.02);
    caught += compare_case(&b, &slow, o).verdict == Verdict::slower;
  }
  EXPECT_GE(caught, trials * 95 / 100);
  std::printf("+10%% at 5 vs 5, cv 2%%: %d of %d SLOWER\n", caught, trials);
  for (double cv : {0.02, 0.05}) {
    int caught2x = 0;
    for (int i = 0; i < trials; ++i) {
      const CaseRun b = reps(100, 3, cv), slow = reps(200, 3, cv);
      caught2x += compare_case(&b, &slow, o).verdict == Verdict::slower;
    }
    EXPECT_GE(caught2x, trials * 99 / 100) << "2x at 3 vs 3, cv " << cv;
    std::printf("2x at 3 vs 3, cv %.0f%%: %d of %d SLOWER\n", 100 * cv, caught2x, trials);
  }
}

TEST(Compare, BusyMachineJudgesOnlyWhatTheLoadCannotExplain) {
  // Records carry "foreign_cpu": the share of the CPUs other processes used while the case was
  // timed. The same load on both sides is common-mode: a clean 2x (every repetition apart) is SLOWER.
  // A load on one side only explains up to 1 / (1 - load): then the same 2x is NOISY, not judged.
  const json ctx = fingerprint_context("cpu A", "2026-01-01T00:00:00+0000");
  auto loaded = [](json reps, double f) {
    for (auto& e : reps) e["foreign_cpu"] = f;
    return reps;
  };
  const std::vector<double> t = {100, 101, 99, 100.5, 99.5}, t2 = {200, 201, 199, 200.5, 199.5};
  const std::vector<double> t12 = {120, 121, 119, 120.5, 119.5};  // +20%, as clean
  const json a = doc_of(ctx, {loaded(iterations("x", t), 0.45), loaded(iterations("y", t), 0.45),
                              loaded(iterations("z", t), 0.45), loaded(iterations("w", t), 0.0)});
  const json b = doc_of(ctx, {loaded(iterations("x", t2), 0.50), loaded(iterations("y", t), 0.45),
                              loaded(iterations("z", t12), 0.60), loaded(iterations("w", t2), 0.60)});
  CompareOptions o;
  auto c = compare_runs(a, "a", b, "b", o);
  auto v = by_name(c);
  EXPECT_EQ(v.at("x").verdict, Verdict::slower) << v.at("x").note;  // 45% vs 50%: explains +10% at most
  EXPECT_NEAR(v.at("x").busy, 0.50, 1e-12);
  EXPECT_NE(v.at("x").note.find("busy machine"), std::string::npos) << v.at("x").note;
  EXPECT_EQ(v.at("y").verdict, Verdict::same);                      // no change: SAME whatever the load
  EXPECT_EQ(v.at("z").verdict, Verdict::noisy) << v.at("z").note;   // 45% -> 60% explains +37.5%
  EXPECT_NE(v.at("z").note.find("explains up to +37.5%"), std::string::npos) << v.at("z").note;
  EXPECT_EQ(v.at("w").verdict, Verdict::noisy) << v.at("w").note;   // quiet -> 60%: explains 2.5x
  EXPECT_TRUE(c.regression());
  EXPECT_EQ(c.inconclusive(), 2u);
  EXPECT_TRUE(comparison_json(c).at("cases").at(0).at("busy").is_number());
  // The same 2x measured under 50% on both sides but with two repetitions back at BASE's level: not
  // apart, not significant (p = 0.15): NOISY.
  json overlap = loaded(iterations("x", {200, 201, 99, 100.5, 199}), 0.50);
  EXPECT_EQ(by_name(compare_runs(a, "a", doc_of(ctx, {overlap}), "b", o)).at("x").verdict, Verdict::noisy);
  // 20 vs 20 repetitions with an outlier on each side (ranges overlap), 2x apart in the median with
  // p < 0.05, the same load: far beyond what load and noise explain, SLOWER.
  std::vector<double> b20, n20;
  for (int i = 0; i < 20; ++i) b20.push_back(100 + i), n20.push_back(200 + 2 * i);
  b20.back() = 190, n20.front() = 150;
  const auto v20 = by_name(compare_runs(doc_of(ctx, {loaded(iterations("x", b20), 0.5)}), "a",
                                        doc_of(ctx, {loaded(iterations("x", n20), 0.5)}), "b", o));
  EXPECT_EQ(v20.at("x").verdict, Verdict::slower) << v20.at("x").note;
  EXPECT_FALSE(v20.at("x").separated);
  // Faster, the same way.
  const json fast = doc_of(ctx, {loaded(iterations("x", {50, 50.5, 49.5, 50.2, 49.8}), 0.45)});
  EXPECT_EQ(by_name(compare_runs(a, "a", fast, "b", o)).at("x").verdict, Verdict::faster);
  // One side unknown (no foreign_cpu): it counts as quiet, so the other side's 60% explains 2.5x.
  const json unknown = doc_of(ctx, {iterations("x", t)});
  EXPECT_EQ(by_name(compare_runs(unknown, "a", doc_of(ctx, {loaded(iterations("x", t2), 0.6)}), "b", o)).at("x").verdict,
            Verdict::noisy);
  // --max-busy 100% turns the load check off: judged as on a quiet machine.
  o.max_busy = 1.0;
  c = compare_runs(a, "a", b, "b", o);
  EXPECT_EQ(by_name(c).at("z").verdict, Verdict::slower);
  EXPECT_EQ(by_name(c).at("w").verdict, Verdict::slower);
  // Bad or out-of-range values in a file are ignored, never trusted: NaN, negative, a string.
  json odd = iterations("x", t2);
  odd[0]["foreign_cpu"] = -3.0;
  odd[1]["foreign_cpu"] = "busy";
  const auto cases = extract_cases(doc_of(ctx, {odd}), "odd");
  EXPECT_EQ(cases.at(0).foreign_cpu, 0.0);
}

// Issue 27: a run compared with itself with every time doubled, both recorded under ~50% foreign CPU,
// printed five NOISY verdicts, "no regression", exit 0. Real files: the fixture base.json loaded,
// marked busy, written; a doubled copy written; compared as the CLI does.
TEST(Compare, DoubledRunUnderCommonLoadIsARegression) {
  TempDir dir("busy2x");
  json base = load_results(kData + "base.json");
  for (auto& e : base["benchmarks"]) e["foreign_cpu"] = 0.5;
  json doubled = base;
  for (auto& e : doubled["benchmarks"])
    if (e.value("aggregate_name", "") != "cv")
      for (const char* k : {"real_time", "cpu_time"}) e[k] = e[k].get<double>() * 2;
  for (auto& e : doubled["benchmarks"]) e["foreign_cpu"] = 0.52;
  write_json(dir.path / "base" / "results.json", base);
  write_json(dir.path / "doubled" / "results.json", doubled);
  const auto a = load_results((dir.path / "base").string()), b = load_results((dir.path / "doubled").string());
  const Comparison c = compare_runs(a, "base", b, "doubled", CompareOptions{});
  std::size_t slower = 0;
  for (const auto& k : c.cases)
    if (k.verdict == Verdict::slower) {
      ++slower;
      EXPECT_NEAR(k.ratio, 2.0, 1e-9) << k.name;
    }
  EXPECT_EQ(slower, c.shared);  // every case timed in both (their repetitions spread by 2% at most)
  EXPECT_TRUE(c.regression());
  std::ostringstream text;
  print_comparison(text, c);
  EXPECT_EQ(text.str().find("no regression"), std::string::npos) << text.str();
  EXPECT_NE(text.str().rfind("REGRESSION: "), std::string::npos);

  // Whatever stays inconclusive says so in the last line, never "no regression": the same pair with
  // one repetition of each case wildly off (a preempted repetition) and the failures dropped.
  json spread = doubled;
  json kept = json::array();
  for (auto& e : spread["benchmarks"]) {
    if (e.value("error_occurred", false) || e.value("verified", true) == false) continue;
    if (e.value("repetition_index", -1) == 4) e["real_time"] = e["real_time"].get<double>() / 4;
    kept.push_back(e);
  }
  spread["benchmarks"] = kept;
  const Comparison n = compare_runs(a, "base", spread, "spread", CompareOptions{});
  EXPECT_FALSE(n.regression());
  EXPECT_GT(n.inconclusive(), 0u);
  std::ostringstream t2;
  print_comparison(t2, n);
  const std::string out = t2.str();
  const std::string last = out.substr(out.rfind('\n', out.size() - 2) + 1);
  EXPECT_EQ(last.rfind("INCONCLUSIVE: ", 0), 0u) << last;
  EXPECT_EQ(out.find("no regression"), std::string::npos) << out;
  EXPECT_EQ(comparison_json(n).at("outcome"), "inconclusive");
}

// Issue 27 item 12: two cases of one name were merged into one 3-vs-6 sample silently.
TEST(Compare, DuplicateCaseNamesAreRefusedNotMerged) {
  const json ctx = fingerprint_context("cpu A", "2026-01-01T00:00:00+0000");
  const json twice = doc_of(ctx, {iterations("x", {100, 101, 99}), iterations("y", {5, 5, 5}), iterations("x", {200, 201, 199})});
  try {
    extract_cases(twice, "twice.json");
    ADD_FAILURE() << "duplicate accepted";
  } catch (const dlb::InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("twice.json: case 'x' is in the file twice (repetition 0 in benchmark entries 1 and 7)"), std::string::npos) << m;
  }
  // Without repetition indices: more repetitions than the entries declare.
  json noidx = doc_of(ctx, {iterations("x", {100, 101, 99}), iterations("x", {200, 201, 199})});
  for (auto& e : noidx["benchmarks"]) e.erase("repetition_index"), e["repetitions"] = 3;
  EXPECT_THROW(extract_cases(noidx, "noidx"), dlb::InputError);
  // A second median aggregate of one name.
  json agg = doc_of(ctx, {iterations("x", {100, 101, 99})});
  for (int k = 0; k < 2; ++k)
    agg["benchmarks"].push_back({{"name", "x_median"}, {"run_name", "x"}, {"run_type", "aggregate"}, {"aggregate_name", "median"},
                                 {"real_time", 100}, {"cpu_time", 100}, {"time_unit", "us"}});
  EXPECT_THROW(extract_cases(agg, "agg"), dlb::InputError);
  // The fixture of the same defect, as the CLI reads it (tests/data/compare/duplicate.json).
  EXPECT_THROW(compare_runs(load_results(kData + "base.json"), "base.json", load_results(kData + "duplicate.json"),
                            "duplicate.json", CompareOptions{}),
               dlb::InputError);
  // One case's repetitions, an error entry and its aggregates are one case, not a duplicate.
  EXPECT_NO_THROW(extract_cases(load_results(kData + "new.json"), "new.json"));
}

TEST(Compare, ExtractCases) {
  // Aggregates only (Google Benchmark --benchmark_report_aggregates_only): one sample, the median.
  json doc = {{"context", json::object()},
              {"benchmarks",
               {{{"name", "agg_median"}, {"run_type", "aggregate"}, {"aggregate_name", "median"}, {"real_time", 2.0}, {"cpu_time", 2.0}, {"time_unit", "ms"}},
                {{"name", "agg_cv"}, {"run_type", "aggregate"}, {"aggregate_name", "cv"}, {"real_time", 0.03}, {"cpu_time", 0.03}, {"time_unit", "ms"}},
                {{"name", "plain"}, {"real_time", 1500.0}, {"time_unit", "ns"}}}}};
  const auto cases = extract_cases(doc, "doc");
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(cases[0].name, "agg");
  EXPECT_DOUBLE_EQ(cases[0].median_us, 2000.0);
  EXPECT_DOUBLE_EQ(cases[0].cv, 0.03);
  EXPECT_EQ(cases[1].name, "plain");  // no run_type: a plain iteration
  EXPECT_DOUBLE_EQ(cases[1].median_us, 1.5);
  // --time cpu reads cpu_time.
  const json d2 = doc_of(json::object(), {json::array({{{"name", "c"}, {"run_type", "iteration"}, {"real_time", 10.0}, {"cpu_time", 4.0}, {"time_unit", "us"}}})});
  EXPECT_DOUBLE_EQ(extract_cases(d2, "d2", TimeField::cpu)[0].median_us, 4.0);
  EXPECT_DOUBLE_EQ(extract_cases(d2, "d2", TimeField::real)[0].median_us, 10.0);
  // A results.jsonl alone (no context) compares like results.json.
  const auto jsonl = extract_cases(load_results(kData + "base_only.jsonl"), "jsonl");
  const auto full = extract_cases(load_results(kData + "base.json"), "json");
  ASSERT_EQ(jsonl.size(), full.size());
  EXPECT_DOUBLE_EQ(jsonl[0].median_us, full[0].median_us);
}

TEST(Compare, BadInputThrowsInputErrorNamingTheFile) {
  for (const char* f : {"truncated.json", "not_json.json", "binary.json", "foreign.json", "no_such_file.json"}) {
    try {
      load_results(kData + f);
      ADD_FAILURE() << f << " loaded";
    } catch (const dlb::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
    }
  }
  // Valid JSON with the wrong content inside the benchmarks array.
  const json not_objects = {{"context", json::object()}, {"benchmarks", {1, 2}}};
  EXPECT_THROW(extract_cases(not_objects, "x"), dlb::InputError);
  const json string_time = doc_of(json::object(), {json::array({{{"name", "c"}, {"real_time", "fast"}}})});
  EXPECT_THROW(extract_cases(string_time, "x"), dlb::InputError);
  const json bad_flag = doc_of(json::object(), {json::array({{{"name", "c"}, {"real_time", 1.0}, {"error_occurred", "yes"}}})});
  EXPECT_THROW(extract_cases(bad_flag, "x"), dlb::InputError);
  const json bad_unit = doc_of(json::object(), {json::array({{{"name", "c"}, {"real_time", 1.0}, {"time_unit", "fortnights"}}})});
  EXPECT_THROW(extract_cases(bad_unit, "x"), dlb::InputError);
}

TEST(Compare, ParseFlags) {
  EXPECT_DOUBLE_EQ(parse_threshold("5%"), 0.05);
  EXPECT_DOUBLE_EQ(parse_threshold("0.05"), 0.05);
  EXPECT_DOUBLE_EQ(parse_threshold("12.5%"), 0.125);
  EXPECT_DOUBLE_EQ(parse_threshold("300%"), 3.0);
  EXPECT_DOUBLE_EQ(parse_threshold("0"), 0.0);
  for (const char* bad : {"5", "1", "abc", "-1%", "-0.1", "", "5%%", "%", " 5%", "5 %", "nan", "inf%", "0x10"})
    EXPECT_THROW(parse_threshold(bad), dlb::UsageError) << bad;
  EXPECT_DOUBLE_EQ(parse_alpha("0.01"), 0.01);
  for (const char* bad : {"0", "1", "-0.05", "5%", "x", ""}) EXPECT_THROW(parse_alpha(bad), dlb::UsageError) << bad;
  EXPECT_EQ(parse_time_field("cpu"), TimeField::cpu);
  EXPECT_EQ(parse_time_field("real"), TimeField::real);
  EXPECT_THROW(parse_time_field("wall"), dlb::UsageError);
  EXPECT_DOUBLE_EQ(parse_max_busy("10%"), 0.10);
  EXPECT_DOUBLE_EQ(parse_max_busy("0.25"), 0.25);
  EXPECT_DOUBLE_EQ(parse_max_busy("100%"), 1.0);
  for (const char* bad : {"", "x", "-1%", "101%", "2", "nan", "%"}) EXPECT_THROW(parse_max_busy(bad), dlb::UsageError) << bad;
  EXPECT_EQ(fmt_change(1.052), "+5.2%");
  EXPECT_EQ(fmt_change(0.9), "-10.0%");
}

TEST(Baseline, KeySlugSaveFind) {
  const json run = doc_of(fingerprint_context("Fixture CPU 9000", "2026-01-01T00:00:00+0000"), {iterations("x", {1, 2, 3})});
  const std::string key = baseline_key(run, "run");
  EXPECT_EQ(key, "Fixture CPU 9000 | OpenBLAS 0.3.21 Haswell");
  const std::string slug = baseline_slug(key);
  EXPECT_EQ(slug.rfind("fixture-cpu-9000-openblas-0-3-21-haswell-", 0), 0u) << slug;
  EXPECT_EQ(slug, baseline_slug(key));                           // stable
  EXPECT_NE(slug, baseline_slug(key + " | NVIDIA H100"));        // another machine, another folder
  EXPECT_EQ(slug.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-"), std::string::npos);
  // A results.jsonl alone has no fingerprint: no key.
  EXPECT_THROW(baseline_key(load_results(kData + "base_only.jsonl"), "jsonl"), dlb::InputError);

  TempDir dir("baseline");
  EXPECT_FALSE(find_baseline((dir.path / "none").string(), key));  // no such folder: no baseline
  std::string replaced = "x";
  const std::string folder = save_baseline(run, key, dir.path.string(), &replaced);
  EXPECT_TRUE(replaced.empty());
  EXPECT_EQ(fs::path(folder).filename().string(), slug);
  ASSERT_TRUE(find_baseline(dir.path.string(), key));
  EXPECT_EQ(*find_baseline(dir.path.string(), key), folder);
  EXPECT_FALSE(find_baseline(dir.path.string(), key + " | NVIDIA H100"));
  // The saved file is a results file again, with the same cases.
  EXPECT_EQ(extract_cases(load_results(folder), "saved").size(), 1u);
  // Saving again replaces it and says what it replaced.
  save_baseline(run, key, dir.path.string(), &replaced);
  EXPECT_NE(replaced.find("2026-01-01"), std::string::npos) << replaced;
  // A renamed folder is still found by its key.txt.
  fs::rename(folder, dir.path / "my-gpu-box");
  ASSERT_TRUE(find_baseline(dir.path.string(), key));
  EXPECT_EQ(fs::path(*find_baseline(dir.path.string(), key)).filename().string(), "my-gpu-box");
}

TEST(Baseline, KeyHoldsCoreAndThreadCounts) {
  // A 96-core run must not be checked against a 2-core baseline of the same CPU model.
  auto run_on = [](int cores, int threads) {
    json ctx = fingerprint_context("Fixture CPU 9000", "2026-01-01T00:00:00+0000");
    ctx["cpu"]["logical_cores"] = cores;
    ctx["cpu"]["kernel_threads"] = threads;
    ctx["openblas"]["threads"] = threads;
    return doc_of(ctx, {iterations("x", {1, 2, 3})});
  };
  const std::string k2 = baseline_key(run_on(2, 2), "r2"), k96 = baseline_key(run_on(96, 96), "r96");
  EXPECT_EQ(k2, "Fixture CPU 9000 | OpenBLAS 0.3.21 Haswell | 2 cores | OpenBLAS 2 threads | 2 kernel threads");
  EXPECT_NE(k2, k96);
  EXPECT_NE(baseline_slug(k2), baseline_slug(k96));
  EXPECT_NE(k2, baseline_key(run_on(2, 1), "r21"));  // same cores, fewer threads (DLB_CPU_THREADS=1)
  TempDir dir("baseline-counts");
  EXPECT_EQ(nearest_baseline_difference(dir.path.string(), k96), "");  // nothing saved yet
  save_baseline(run_on(2, 2), k2, dir.path.string());
  EXPECT_FALSE(find_baseline(dir.path.string(), k96));
  const std::string diff = nearest_baseline_difference(dir.path.string(), k96);
  EXPECT_NE(diff.find("has 2 cores, OpenBLAS 2 threads, 2 kernel threads (this run: 96 cores, OpenBLAS 96 threads, 96 kernel threads)"),
            std::string::npos)
      << diff;
  EXPECT_EQ(diff.find("Fixture CPU"), std::string::npos) << diff;  // the parts that agree are not repeated
}

TEST(History, StepDetection) {
  std::mt19937_64 rng(9);
  std::normal_distribution<double> z(0, 1);
  auto series = [&](std::size_t n, std::size_t at, double ratio, double noise) {
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = 100 * (i >= at ? ratio : 1) * (1 + noise * z(rng));
    return v;
  };
  // A sustained +20% from run 6 of 12, 1% noise: found, in the right place, about the right size.
  auto s = detect_step(series(12, 6, 1.2, 0.01), {}, 3, 0.05);
  EXPECT_TRUE(s.found);
  EXPECT_EQ(s.at, 6u);
  EXPECT_NEAR(s.ratio, 1.2, 0.03);
  // Faster works the same way.
  s = detect_step(series(10, 4, 0.8, 0.01), {}, 3, 0.05);
  EXPECT_TRUE(s.found);
  EXPECT_EQ(s.at, 4u);
  // Flat with 1% noise: no step at a 5% threshold; and even with no threshold at all, the noise
  // criterion (3 standard errors) keeps false steps rare despite trying every split.
  int false_steps = 0, false_steps_no_threshold = 0;
  for (int i = 0; i < 500; ++i) {
    const auto flat = series(12, 0, 1, 0.01);
    false_steps += detect_step(flat, {}, 3, 0.05).found;
    false_steps_no_threshold += detect_step(flat, {}, 3, 0.0).found;
  }
  EXPECT_EQ(false_steps, 0);
  EXPECT_LE(false_steps_no_threshold, 25) << false_steps_no_threshold;  // <= 5%
  // One outlier run is not a sustained shift.
  auto v = series(12, 0, 1, 0.01);
  v[7] *= 1.5;
  EXPECT_FALSE(detect_step(v, {}, 3, 0.05).found);
  // Below the threshold: +3% is real here but not flagged at 5%; flagged at 2%.
  const auto small = series(12, 6, 1.03, 0.002);
  EXPECT_FALSE(detect_step(small, {}, 3, 0.05).found);
  EXPECT_TRUE(detect_step(small, {}, 3, 0.02).found);
  // Runs whose medians are only known to 10% (their own repetitions) do not get a +8% step from a
  // lucky, consistent series; known to 1%, they do.
  EXPECT_FALSE(detect_step(series(8, 4, 1.08, 0.0), std::vector<double>(8, 0.10), 3, 0.05).found);
  EXPECT_TRUE(detect_step(series(8, 4, 1.08, 0.0), std::vector<double>(8, 0.01), 3, 0.05).found);
  // Too few runs.
  EXPECT_FALSE(detect_step({1, 2, 3, 4, 5}, {}, 3, 0.05).found);
}

TEST(History, LoadsRunsSortedByDateOfOneMachine) {
  TempDir dir("history");
  // 8 runs of machine A written in scrambled order; a +25% step for "slow" from the 5th run (by date);
  // one run of machine B, one broken folder, one unrelated folder.
  const int order[] = {3, 0, 7, 5, 1, 6, 2, 4};
  for (int i : order) {
    char date[40];
    std::snprintf(date, sizeof date, "2026-03-%02dT12:00:00+0100", 10 + i);
    const double f = i >= 4 ? 1.25 : 1.0;
    write_json(dir.path / ("run-" + std::to_string(7 - i)) / "results.json",
               doc_of(fingerprint_context("cpu A", date),
                      {iterations("flat", {100, 100.5, 99.5}), iterations("slow", {200 * f, 201 * f, 199 * f})}));
  }
  write_json(dir.path / "other-machine" / "results.json",
             doc_of(fingerprint_context("cpu B", "2026-03-01T00:00:00+0000"), {iterations("flat", {5, 5, 5})}));
  fs::create_directories(dir.path / "broken");
  std::ofstream(dir.path / "broken" / "results.json") << "{\"context\": {";
  fs::create_directories(dir.path / "notes");
  // Impossible dates (month 13, hour 99; February 30) are no dates: left out with a warning naming
  // them, never normalised into a real date nor sorted among the runs.
  for (const char* bad : {"2026-13-01T99:00:00+0000", "2026-02-30T12:00:00+0000"})
    write_json(dir.path / ("bad-date-" + std::string(bad).substr(5, 5)) / "results.json",
               doc_of(fingerprint_context("cpu A", bad), {iterations("flat", {1, 1, 1}), iterations("slow", {1, 1, 1})}));

  HistoryOptions o;
  const History h = load_history(dir.path.string(), o);
  EXPECT_EQ(h.key, "cpu A | OpenBLAS 0.3.21 Haswell");
  ASSERT_EQ(h.runs.size(), 8u);
  for (std::size_t i = 1; i < h.runs.size(); ++i) EXPECT_LT(h.runs[i - 1].date, h.runs[i].date);
  EXPECT_EQ(h.runs.front().date, "2026-03-10T12:00:00+0100");
  EXPECT_EQ(h.warnings.size(), 4u);  // the broken folder, the other machine, the two impossible dates
  int bad_dates = 0;
  for (const auto& w : h.warnings) bad_dates += w.find("is not a valid date; left out") != std::string::npos;
  EXPECT_EQ(bad_dates, 2);
  ASSERT_EQ(h.cases.size(), 2u);
  EXPECT_FALSE(h.cases[0].step.found);
  ASSERT_TRUE(h.cases[1].step.found);
  EXPECT_EQ(h.cases[1].runs[h.cases[1].step.at], 4u);  // the 5th run
  EXPECT_NEAR(h.cases[1].step.ratio, 1.25, 1e-9);
  const json j = history_json(h);
  EXPECT_EQ(j.at("cases").at(1).at("step").at("run").get<int>(), 5);

  EXPECT_THROW(load_history((dir.path / "nope").string(), o), dlb::InputError);
  EXPECT_THROW(load_history((dir.path / "notes").string(), o), dlb::InputError);
}

TEST(History, ParseDate) {
  EXPECT_DOUBLE_EQ(parse_date("1970-01-01T00:00:10+0000"), 10);
  EXPECT_DOUBLE_EQ(parse_date("1970-01-01T01:00:10+0100"), 10);
  EXPECT_DOUBLE_EQ(parse_date("1970-01-01T01:00:10+01:00"), 10);
  EXPECT_DOUBLE_EQ(parse_date("1970-01-01T00:00:10Z"), 10);
  EXPECT_DOUBLE_EQ(parse_date("1969-12-31T23:00:10-0100"), 10);
  EXPECT_TRUE(std::isnan(parse_date("yesterday")));
  EXPECT_DOUBLE_EQ(parse_date("1970-01-01T00:00:10.250+00:00"), 10);
  EXPECT_DOUBLE_EQ(parse_date("1972-02-29T00:00:00Z"), 68169600);  // a leap day
  for (const char* bad : {"2026-13-01T12:00:00+0000", "2026-01-01T99:00:00+0000", "2026-00-10T12:00:00Z",
                          "2026-02-29T12:00:00Z", "2026-04-31T12:00:00Z", "2026-01-01T12:60:00Z", "2026-01-01T12:00:61Z",
                          "2026-01-00T12:00:00Z", "2026-01-01T12:00:00+2500", "2026-01-01T12:00:00+01:",
                          "2026-01-01T12:00:00 junk", "+026-01-01T12:00:00Z", "2026-1-01T12:00:00Z", "2026-01-01"})
    EXPECT_TRUE(std::isnan(parse_date(bad))) << bad;
}

TEST(Compare, NoiseFloorTurnsAChangeWithinItIntoNoisy) {
  const CaseRun base = timed("c", {100, 101, 99, 100, 100.5}), neu = timed("c", {130, 131, 129, 130, 130.5});
  CompareOptions o;
  EXPECT_EQ(compare_case(&base, &neu, o).verdict, Verdict::slower);  // +30%, clean
  o.noise_floor = 0.5;  // this machine's runs differ by up to 50%: +30% cannot be told from that
  auto c = compare_case(&base, &neu, o);
  EXPECT_EQ(c.verdict, Verdict::noisy);
  EXPECT_FALSE(c.fatal);
  EXPECT_NE(c.note.find("noise floor 50"), std::string::npos) << c.note;
  o.case_floors["c"] = 0.2;  // a learned floor for this case wins over the flag's
  o.floor_runs = 4;
  EXPECT_EQ(compare_case(&base, &neu, o).verdict, Verdict::slower);
  o.case_floors["c"] = 0.4;
  c = compare_case(&base, &neu, o);
  EXPECT_EQ(c.verdict, Verdict::noisy);
  EXPECT_NE(c.note.find("learned from 4 runs"), std::string::npos) << c.note;
  const CaseRun neu2 = timed("c", {300, 301, 299, 300, 300});  // 3x is beyond any floor here
  EXPECT_EQ(compare_case(&base, &neu2, o).verdict, Verdict::slower);
}

TEST(History, LearnedFloorIsTheSpreadOfEachCasesMedians) {
  TempDir dir("floors");
  const double scale[] = {1.0, 1.1, 0.95, 1.2};
  for (int i = 0; i < 4; ++i) {
    char date[40];
    std::snprintf(date, sizeof date, "2026-03-%02dT12:00:00+0100", 10 + i);
    write_json(dir.path / ("run-" + std::to_string(i)) / "results.json",
               doc_of(fingerprint_context("cpu A", date),
                      {iterations("steady", {100, 101, 99}), iterations("wobbly", {200 * scale[i], 201 * scale[i], 199 * scale[i]})}));
  }
  std::size_t runs = 0;
  const auto f = learned_floors(dir.path.string(), TimeField::real, &runs);
  EXPECT_EQ(runs, 4u);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_NEAR(f.at("steady"), 0.0, 1e-12);
  EXPECT_NEAR(f.at("wobbly"), 1.2 / 0.95 - 1, 1e-9);
  fs::remove_all(dir.path / "run-3");
  fs::remove_all(dir.path / "run-2");
  EXPECT_THROW(learned_floors(dir.path.string(), TimeField::real), dlb::InputError);  // 2 runs: too few
}
