// libFuzzer target for the results readers: the bytes become a results.json on disk (a results.jsonl
// when they start like one: '{"', where Google Benchmark's pretty JSON starts with '{' and a newline), then go through everything `compare`, `baseline check` and
// `history` do with a file they did not write: load_results, extract_cases (real and cpu time),
// compare_runs against itself with the table and JSON output, the baseline key, every export format,
// and load_history / the dashboard's data over a folder holding it. The contract: a bad file throws InputError; anything else escaping (another
// exception, a crash, a sanitizer finding, a hang, unbounded memory) is a finding.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "harness/baseline.h"
#include "harness/compare.h"
#include "harness/dashboard.h"
#include "harness/export.h"
#include "harness/history.h"
#include "harness/results.h"
#include "kernels/common/errors.h"

namespace fs = std::filesystem;
using namespace dlb::harness;

namespace {

const fs::path& work_dir() {
  static const fs::path dir = [] {
    char tmpl[] = "/tmp/dlb-fuzz-results-XXXXXX";
    if (!mkdtemp(tmpl)) std::abort();
    fs::create_directories(fs::path(tmpl) / "runs" / "run");
    return fs::path(tmpl);
  }();
  return dir;
}

void exercise(const std::string& path) {
  nlohmann::json doc;
  try {
    doc = load_results(path);
  } catch (const dlb::InputError&) {
    return;
  }
  for (TimeField f : {TimeField::real, TimeField::cpu}) {
    try {
      CompareOptions o;
      o.time = f;
      const Comparison c = compare_runs(doc, "a", doc, "b", o);
      std::ostringstream out;
      print_comparison(out, c);
      (void)comparison_json(c).dump();
      (void)c.regression_line();
    } catch (const dlb::InputError&) {
    }
  }
  try {
    (void)baseline_key(doc, "doc");
  } catch (const dlb::InputError&) {
  }
  (void)describe_run(doc);
  try {
    const auto cases = export_cases(doc, "doc");
    for (ExportFormat f : {ExportFormat::gab_bigger, ExportFormat::gab_smaller, ExportFormat::bencher, ExportFormat::csv})
      (void)export_text(cases, f, doc);
  } catch (const dlb::InputError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const bool jsonl = size > 1 && data[0] == '{' && data[1] == '"';
  const fs::path run = work_dir() / "runs" / "run";
  fs::remove(run / "results.json");
  fs::remove(run / "results.jsonl");
  const fs::path file = run / (jsonl ? "results.jsonl" : "results.json");
  {
    std::ofstream f(file, std::ios::binary);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  exercise(file.string());
  try {
    HistoryOptions o;
    o.min_segment = 1;
    const History h = load_history((work_dir() / "runs").string(), o);
    std::ostringstream out;
    print_history(out, h, o);
    (void)history_json(h).dump();
    (void)dashboard_json(load_histories((work_dir() / "runs").string(), o), o, (work_dir() / "site").string()).dump();
  } catch (const dlb::InputError&) {
  }
  return 0;
}
