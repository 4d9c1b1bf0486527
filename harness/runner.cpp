// The run loop (see runner.h). Google Benchmark does the timing and the statistics; we do setup,
// verification, throughput, records, progress and the interrupt policy.
#include "harness/runner.h"

#include <unistd.h>

#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cmath>
#include <ctime>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>

#include "bench/case.h"
#include "harness/commands.h"
#include "harness/fingerprint.h"
#include "harness/results.h"
#include "harness/sweep.h"
#include "harness/tables.h"
#include "kernels/common/device.h"
#include "kernels/common/gpu_probe.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/peak.h"

namespace dlb::harness {

using json = nlohmann::json;
using bench::Case;
using bench::CaseSpec;

namespace {

std::atomic<bool> g_interrupted{false};

extern "C" void on_sigint(int) {
  if (g_interrupted.load()) _exit(130);  // second Ctrl-C: leave now (results.jsonl is already on disk)
  g_interrupted.store(true);
  const char msg[] = "\ndlbench: interrupted -- finishing the current case, then writing results (Ctrl-C again to quit now)\n";
  (void)!write(2, msg, sizeof msg - 1);
}

class Collector : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override { runs_.insert(runs_.end(), runs.begin(), runs.end()); }
  std::vector<Run> runs_;
};

const char* metric_key(bench::Metric m) {
  switch (m) {
    case bench::Metric::gflops: return "gflops";
    case bench::Metric::gb_per_s: return "gb_per_s";
    case bench::Metric::imgs_per_s: return "imgs_per_s";
  }
  return "gflops";
}

json base_entry(const bench::CaseId& id, std::size_t index) {
  json e;
  const std::string n = id.name();
  e["name"] = n;
  e["run_name"] = n;
  e["family_index"] = index;
  e["per_family_instance_index"] = 0;
  e["threads"] = 1;
  e["suite"] = id.suite;
  e["op"] = id.op;
  e["device"] = id.device;
  e["dtype"] = id.dtype;
  for (const auto& [k, v] : id.params) e[k] = v;
  if (id.device == "cpu") e["cpu_isa"] = cpu::isa_name(cpu::isa_active());  // the DLB_CPU_ISA level in force
  return e;
}

json failure_entry(json e, const std::string& message) {
  e["run_type"] = "iteration";
  e["repetitions"] = 0;
  e["repetition_index"] = 0;
  e["iterations"] = 0;
  e["real_time"] = 0;
  e["cpu_time"] = 0;
  e["time_unit"] = "us";
  e["error_occurred"] = true;
  e["error_message"] = message;
  return e;
}

double cv_of_iterations(const std::vector<benchmark::BenchmarkReporter::Run>& runs) {
  double s = 0, s2 = 0;
  int n = 0;
  for (const auto& r : runs) {
    if (r.run_type != benchmark::BenchmarkReporter::Run::RT_Iteration || r.error_occurred) continue;
    const double t = r.GetAdjustedRealTime();
    s += t, s2 += t * t, ++n;
  }
  if (n < 2 || s <= 0) return 0;
  const double mean = s / n, var = std::max(0.0, (s2 - n * mean * mean) / (n - 1));
  return std::sqrt(var) / mean;
}

// Tensor-core dense peaks in flop/clock/SM by compute capability (NVIDIA architecture whitepapers).
double tensor_flops_per_clk_sm(const std::string& cc, const std::string& dtype) {
  const bool half = dtype == "fp16" || dtype == "bf16";
  if (cc == "9.0") return half ? 4096 : dtype == "tf32" ? 2048 : 0;
  if (cc == "8.0") return half ? 2048 : dtype == "tf32" ? 1024 : 0;
  return 0;
}

std::string progress_prefix(std::size_t i, std::size_t n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "[%*zu/%zu] ", static_cast<int>(std::to_string(n).size()), i + 1, n);
  return buf;
}

std::string eta(double elapsed, std::size_t done, std::size_t total) {
  if (done == 0 || done >= total) return "";
  const double left = elapsed / done * (total - done);
  char buf[48];
  if (left < 90) std::snprintf(buf, sizeof buf, "  eta %.0fs", left);
  else std::snprintf(buf, sizeof buf, "  eta %.0fm%02.0fs", std::floor(left / 60), std::fmod(left, 60));
  return buf;
}

}  // namespace

Peaks measure_cpu_peaks() {
  const auto p = cpu::measure_peaks();
  Peaks k;
  k.cpu_fp32_gflops = p.fp32_gflops;
  k.cpu_mem_gb_per_s = p.mem_gb_per_s;
  k.cpu_fma_isa = p.fma_isa;
  k.threads = p.threads;
  k.measured = true;
  return k;
}

double peak_for(const json& e, const std::string& metric, const Peaks& peaks) {
  const std::string dev = e.value("device", ""), dtype = e.value("dtype", "");
  if (dev == "cpu") {
    if (metric == "gflops" && dtype == "fp32") return peaks.cpu_fp32_gflops;
    if (metric == "gflops" && dtype == "bf16" && cpu_has_flag("avx512_bf16")) return 2 * peaks.cpu_fp32_gflops;
    if (metric == "gb_per_s") return peaks.cpu_mem_gb_per_s;
    return 0;
  }
  if (!bench::is_gpu(dev)) return 0;
  const int idx = bench::gpu_index(dev);
  for (const auto& g : cuda_info().gpus) {
    if (g.index != idx) continue;
    if (metric == "gb_per_s") return g.peak_mem_gb_per_s;
    if (metric != "gflops") return 0;
    if (dtype == "fp32") return g.peak_fp32_gflops;
    const std::string cc = std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor);
    return tensor_flops_per_clk_sm(cc, dtype) * g.sms * g.sm_clock_mhz * 1e-3;
  }
  return 0;
}

void add_throughput(json& e, double seconds, double flops, double bytes, double items, const std::string& metric,
                    double peak) {
  if (!(seconds > 0)) return;
  double v = 0;
  if (metric == "gflops") v = flops / seconds * 1e-9;
  else if (metric == "gb_per_s") v = bytes / seconds * 1e-9;
  else v = items / seconds;
  e[metric] = v;
  if (flops > 0 && metric != "gflops") e["gflops"] = flops / seconds * 1e-9;
  if (peak > 0) e["pct_of_peak"] = 100.0 * v / peak;
}

std::vector<json> run_case(const CaseSpec& spec, std::size_t index, const TimingPolicy& policy, const Peaks& peaks,
                           json& record) {
  json base = base_entry(spec.id, index);
  std::vector<json> entries;
  std::unique_ptr<Case> c;
  try {
    c = spec.make();
    c->setup();
    const CheckResult chk = c->verify();
    base["verified"] = chk.ok;
    base["max_rel_err"] = chk.max_rel_err;
    base["tolerance"] = chk.tolerance;
    if (!chk.ok) {
      record = failure_entry(base, "verification failed: " + chk.message);
      entries.push_back(record);
    } else {
      const std::string metric = metric_key(c->metric());
      const bench::Work w = c->work();
      const bool manual = c->manual_time();
      const std::string fn = spec.id.name();
      auto time_it = [&](int r) {
        Collector col;
        Case* cp = c.get();
        auto* b = benchmark::RegisterBenchmark(fn.c_str(), [cp, manual](benchmark::State& st) {
          for (auto _ : st) {
            try {
              const double s = cp->run();
              if (manual) st.SetIterationTime(s);
            } catch (const std::exception& e) {
              st.SkipWithError(e.what());
              break;
            }
          }
        });
        b->Repetitions(r)->Unit(benchmark::kMicrosecond);
        if (manual) b->UseManualTime();
        else b->UseRealTime();
        if (c->iterations() > 0) b->Iterations(c->iterations());
        else b->MinTime(policy.min_time)->MinWarmUpTime(std::min(0.05, policy.min_time));
        benchmark::RunSpecifiedBenchmarks(&col);
        benchmark::ClearRegisteredBenchmarks();
        return col.runs_;
      };
      const int r0 = !policy.repetitions_given && c->repetitions() > 0 ? c->repetitions() : policy.repetitions;
      auto runs = time_it(r0);
      // Noise-aware: a noisy first pass is redone once with twice the repetitions.
      if (policy.retry_noisy && r0 > 1 && r0 < 20 && cv_of_iterations(runs) > policy.max_cv) runs = time_it(std::min(20, 2 * r0));
      for (const auto& r : runs) {
        json e = base;
        const bool agg = r.run_type == benchmark::BenchmarkReporter::Run::RT_Aggregate;
        e["name"] = agg ? fn + "_" + r.aggregate_name : fn;
        e["run_type"] = agg ? "aggregate" : "iteration";
        e["repetitions"] = r.repetitions;
        if (agg) {
          e["aggregate_name"] = r.aggregate_name;
          e["aggregate_unit"] = r.aggregate_unit == benchmark::kPercentage ? "percentage" : "time";
        } else {
          e["repetition_index"] = r.repetition_index;
        }
        e["iterations"] = r.iterations;
        e["real_time"] = r.GetAdjustedRealTime();
        e["cpu_time"] = r.GetAdjustedCPUTime();
        e["time_unit"] = "us";
        if (r.error_occurred) {
          e["error_occurred"] = true;
          e["error_message"] = r.error_message;
        } else if (!agg || r.aggregate_name == "mean" || r.aggregate_name == "median") {
          add_throughput(e, r.GetAdjustedRealTime() * 1e-6, w.flops, w.bytes, w.items, metric,
                         peak_for(e, metric, peaks));
        }
        c->annotate(e);
        entries.push_back(e);
      }
      // The case's record for tables: the median, or the only repetition.
      for (const auto& e : entries)
        if (e.value("aggregate_name", "") == "median") record = e;
      if (record.is_null() && !entries.empty()) record = entries.front();
    }
  } catch (const OutOfMemory& e) {
    record = failure_entry(base, e.what());
    record["error"] = "out of memory";
    record["verified"] = false;
    entries = {record};
  } catch (const Unsupported& e) {
    record = failure_entry(base, std::string("skipped: ") + e.what());
    record["skipped"] = e.what();
    entries = {record};
  } catch (const std::exception& e) {
    record = failure_entry(base, e.what());
    record["verified"] = false;
    entries = {record};
  }
  if (c) {
    try {
      c->teardown();
    } catch (...) {
    }
  }
  c.reset();
  if (c) {
    try {
      c->teardown();
    } catch (...) {
    }
  }
  return entries;
}

std::vector<std::string> resolve_devices(const std::string& spec, std::string* note) {
  const CudaInfo& cu = cuda_info();
  std::vector<std::string> out;
  auto add = [&](const std::string& d) {
    for (const auto& x : out)
      if (x == d) return;
    out.push_back(d);
  };
  for (const std::string& d : parse_words(spec, "--device")) {
    if (d == "cpu") {
      add("cpu");
    } else if (d == "all") {
      add("cpu");
      for (const auto& g : cu.gpus) add("cuda:" + std::to_string(g.index));
      if (!cu.available && note) *note = "GPU cases skipped: " + cu.reason;
    } else if (d == "cuda" || d == "gpu") {
      if (!cu.available) throw UsageError("--device " + d + ": " + cu.reason);
      for (const auto& g : cu.gpus) add("cuda:" + std::to_string(g.index));
    } else if (d.rfind("cuda:", 0) == 0) {
      const std::string n = d.substr(5);
      if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos || n.size() > 4)
        throw UsageError("--device '" + d + "': expected cuda:N with N a GPU index");
      if (!cu.available) throw UsageError("--device " + d + ": " + cu.reason);
      const int idx = std::stoi(n);
      if (idx >= static_cast<int>(cu.gpus.size()))
        throw UsageError("--device " + d + ": there are " + std::to_string(cu.gpus.size()) + " CUDA device(s)");
      add(d);
    } else {
      throw UsageError("--device '" + d + "': unknown device (expected cpu, cuda, cuda:N or all)");
    }
  }
  return out;
}

std::string default_out_dir() {
  char host[128] = {0};
  gethostname(host, sizeof host - 1);
  std::time_t t = std::time(nullptr);
  char ts[32];
  std::strftime(ts, sizeof ts, "%Y%m%d-%H%M%S", std::localtime(&t));
  return std::string("results/") + ts + "-" + host;
}

int run_suites(const RunOptions& opts) {
  // 1. Everything that can be wrong with the input is checked before anything runs.
  std::string device_note;
  const auto devices = resolve_devices(opts.device, &device_note);
  std::regex filter;
  if (!opts.filter.empty()) {
    try {
      filter = std::regex(opts.filter);
    } catch (const std::regex_error& e) {
      throw UsageError("--filter '" + opts.filter + "': not a valid regular expression");
    }
  }
  std::vector<std::pair<std::string, CaseSpec>> cases;  // (suite, case)
  std::map<std::string, const bench::Suite*> suites;
  for (const auto& name : opts.suites) {
    const bench::Suite* s = bench::find_suite(name);
    if (!s) {
      std::string known;
      for (const auto& x : bench::all_suites()) known += (known.empty() ? "" : ", ") + x.name;
      throw UsageError("--suite '" + name + "': unknown suite (known: " + known + ")");
    }
    suites[name] = s;
    bench::SuiteOptions so;
    so.axes = suite_axes(name, opts.quick, opts.overrides);
    so.quick = opts.quick;
    so.devices = devices;
    so.extra = opts.extra;
    for (auto& c : s->expand(so))
      if (opts.filter.empty() || std::regex_search(c.id.name(), filter)) cases.emplace_back(name, std::move(c));
  }
  if (!device_note.empty()) std::cerr << "dlbench: " << device_note << "\n";
  if (opts.list_only) {
    for (const auto& [s, c] : cases) std::cout << c.id.name() << "\n";
    return 0;
  }
  TimingPolicy policy;
  policy.repetitions = opts.repetitions > 0 ? opts.repetitions : 5;  // 5 a side: the fewest with which a Mann-Whitney test can reach p < 0.05
  policy.repetitions_given = opts.repetitions > 0;
  policy.min_time = opts.min_time > 0 ? opts.min_time : (opts.quick ? 0.02 : 0.1);
  policy.max_cv = opts.max_cv;
  policy.retry_noisy = !opts.quick;
  ResultsWriter writer(opts.out.empty() ? default_out_dir() : opts.out);

  // 2. Context: fingerprint + measured peaks.
  json context = fingerprint(opts.argv);
  Peaks peaks;
  bool cpu_cases = false;
  for (const auto& [s, c] : cases) cpu_cases |= c.id.device == "cpu";
  if (cpu_cases) {
    std::cerr << "dlbench: measuring CPU peaks (FMA, memory bandwidth)...\n";
    peaks = measure_cpu_peaks();
    context["peaks"] = {{"cpu_fp32_gflops", peaks.cpu_fp32_gflops},
                        {"cpu_mem_gb_per_s", peaks.cpu_mem_gb_per_s},
                        {"cpu_fma_isa", peaks.cpu_fma_isa},
                        {"threads", peaks.threads}};
  }
  // GPU ceilings: theoretical ones are in context.cuda.gpus; add what cuBLAS measures on each GPU used.
  for (const auto& d : devices) {
    if (!bench::is_gpu(d)) continue;
    try {
      const auto m = measure_gpu_peaks(bench::gpu_index(d));
      context["peaks"]["gpus"][d] = {{"cublas_sgemm_gflops", m.cublas_sgemm_gflops},
                                     {"cublas_hgemm_tc_gflops", m.cublas_hgemm_tc_gflops}};
    } catch (const std::exception& e) {
      context["peaks"]["gpus"][d] = {{"error", e.what()}};
    }
  }
  context["run"] = {{"suites", opts.suites},     {"devices", devices},   {"quick", opts.quick},
                    {"repetitions", policy.repetitions}, {"min_time_s", policy.min_time}, {"filter", opts.filter},
                    {"cases", cases.size()},     {"interrupted", false}};
  writer.write_json(context);

  auto* old_handler = std::signal(SIGINT, on_sigint);
  std::cerr << "dlbench: " << cases.size() << " case(s) -> " << writer.dir() << "\n";
  if (cases.empty())
    std::cerr << "dlbench: nothing to run for --suite/--device/--filter as given (see: dlbench list)\n";

  // 3. The loop.
  const auto t_start = std::chrono::steady_clock::now();
  int failed = 0;
  std::map<std::string, std::vector<json>> summary;  // suite -> one record per case
  for (std::size_t i = 0; i < cases.size(); ++i) {
    if (g_interrupted.load()) break;
    const auto& [suite_name, spec] = cases[i];
    std::cerr << progress_prefix(i, cases.size()) << spec.id.name() << " " << std::flush;
    json record;
    const auto entries = run_case(spec, i, policy, peaks, record);
    if (record.value("error_occurred", false) && !record.contains("skipped") && record.value("error", "") != "out of memory")
      ++failed;
    writer.append(entries);
    writer.write_json(context);
    summary[suite_name].push_back(record);

    // Progress line, finished.
    std::ostringstream line;
    if (record.value("error_occurred", false)) {
      line << (record.contains("skipped") ? "SKIPPED " : "FAILED ") << record.value("error_message", "");
    } else {
      char buf[64];
      std::snprintf(buf, sizeof buf, "ok (err %.1e) ", record.value("max_rel_err", 0.0));
      line << buf << fmt_seconds(record.value("real_time", 0.0) * 1e-6);
      for (const char* k : {"gflops", "gb_per_s", "imgs_per_s"})
        if (record.contains(k)) {
          const char* unit = std::string(k) == "gflops" ? " GFLOP/s" : std::string(k) == "gb_per_s" ? " GB/s" : " imgs/s";
          line << "  " << fmt_number(record.at(k).get<double>()) << unit;
          break;
        }
      if (record.contains("pct_of_peak")) line << " (" << fmt_number(record.at("pct_of_peak").get<double>(), 3) << "% of peak)";
    }
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    std::cerr << line.str() << eta(elapsed, i + 1, cases.size()) << "\n";
  }
  std::signal(SIGINT, old_handler);
  const bool interrupted = g_interrupted.load();
  context["run"]["interrupted"] = interrupted;
  context["run"]["wall_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  writer.write_json(context);

  // 4. Tables: a generic one per suite, then the suite's own (the lecture layout, ...).
  for (const auto& name : opts.suites) {
    auto it = summary.find(name);
    if (it == summary.end()) continue;
    std::cout << "\n## " << name << "\n\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& r : it->second) {
      std::string thr = "-", pct = "-";
      for (const char* k : {"gflops", "gb_per_s", "imgs_per_s"})
        if (r.contains(k)) {
          thr = fmt_number(r.at(k).get<double>()) + " " + (std::string(k) == "gflops" ? "GFLOP/s" : std::string(k) == "gb_per_s" ? "GB/s" : "imgs/s");
          break;
        }
      if (r.contains("pct_of_peak")) pct = fmt_number(r.at("pct_of_peak").get<double>(), 3);
      const bool err = r.value("error_occurred", false);
      const std::string status = r.contains("skipped") ? "skipped" : err ? (r.value("error", "") == "out of memory" ? "out of memory" : "FAILED") : "yes";
      rows.push_back({r.value("run_name", ""), status, err ? "-" : fmt_seconds(r.value("real_time", 0.0) * 1e-6), thr, pct});
    }
    print_table(std::cout, {"Case", "Verified", "Median time", "Throughput", "% of peak"}, rows);
    if (suites[name]->summarize) suites[name]->summarize(it->second, std::cout);
  }
  std::cout << "\nresults: " << writer.dir() << "/results.json (" << writer.entries().size() << " entries)\n";
  if (failed) std::cerr << "dlbench: " << failed << " case(s) failed\n";
  if (interrupted) {
    std::cerr << "dlbench: interrupted; results so far are in " << writer.dir() << "\n";
    return 130;
  }
  if (opts.report && !cases.empty()) {
    const std::string rep = writer.dir() + "/report";
    if (generate_report({writer.dir()}, rep) == 0) std::cout << "report:  " << rep << "/index.html\n";
  }
  return failed ? 1 : 0;
}

}  // namespace dlb::harness
