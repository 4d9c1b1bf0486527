// Run comparison (see compare.h for the verdict rules).
#include "harness/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <ostream>

#include "harness/fingerprint.h"
#include "harness/stats.h"
#include "harness/tables.h"
#include "kernels/common/errors.h"

namespace dlb::harness {

using json = nlohmann::json;

// Google Benchmark writes time_unit ns | us | ms | s; everything here is in microseconds.
double to_us(double t, const std::string& unit, const std::string& where) {
  if (unit == "us" || unit.empty()) return t;
  if (unit == "ns") return t * 1e-3;
  if (unit == "ms") return t * 1e3;
  if (unit == "s") return t * 1e6;
  throw InputError(where + ": unknown time_unit '" + unit + "'");
}

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string fmt_pct(double v) {  // 0.018 -> "1.8%"
  char buf[32];
  if (!std::isfinite(v)) return "-";
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * v);
  return buf;
}

std::string fmt_p(double p, bool exact) {
  if (!std::isfinite(p)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, p < 1e-4 ? "%.1e" : "%.2g", p);
  return std::string(buf) + (exact ? "" : " (z)");
}

// What an entry of the results says about its case.
struct Accum {
  CaseRun run;
  bool seen_iteration = false;
  // Where each repetition_index (and aggregate) of this name was seen: a second one is a second case
  // of the same name, which must not be merged into one sample.
  std::map<long long, std::size_t> rep_entry;
  std::map<std::string, std::size_t> agg_entry;
  std::size_t timed_entries = 0;
  double declared_reps = -1;  // "repetitions" of its entries (-1: not given)
  double agg_median = kNaN, agg_mean = kNaN, agg_cv = kNaN;
};

}  // namespace

std::string fmt_change(double ratio) {
  if (!std::isfinite(ratio)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", 100 * (ratio - 1));
  return buf;
}

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::faster: return "FASTER";
    case Verdict::slower: return "SLOWER";
    case Verdict::same: return "SAME";
    case Verdict::noisy: return "NOISY";
    case Verdict::added: return "NEW";
    case Verdict::gone: return "GONE";
    case Verdict::failed: return "FAILED";
  }
  return "?";
}

std::string entry_case_name(const json& e) {
  if (!e.is_object()) return "";
  if (e.contains("run_name") && e["run_name"].is_string()) return e["run_name"].get<std::string>();
  if (!e.contains("name") || !e["name"].is_string()) return "";
  std::string name = e["name"].get<std::string>();
  // Old Google Benchmark files: aggregates are only told apart by a "_median" suffix.
  const std::string agg_name = e.contains("aggregate_name") && e["aggregate_name"].is_string() ? e["aggregate_name"].get<std::string>() : "";
  const std::string suffix = "_" + agg_name;
  const bool agg = e.contains("run_type") && e["run_type"] == "aggregate";
  if (agg && !agg_name.empty() && name.size() > suffix.size() &&
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
    name.resize(name.size() - suffix.size());
  return name;
}

std::vector<CaseRun> extract_cases(const json& doc, const std::string& label, TimeField field) {
  const char* time_key = field == TimeField::cpu ? "cpu_time" : "real_time";
  std::vector<std::string> order;
  std::map<std::string, Accum> acc;
  const json& entries = doc.at("benchmarks");
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const json& e = entries[i];
    const std::string where = label + ": benchmark entry " + std::to_string(i + 1);
    try {
      if (!e.is_object()) throw InputError(where + " is not an object (not a results file)");
      const std::string run_type = e.contains("run_type") && e["run_type"].is_string() ? e["run_type"].get<std::string>() : "iteration";
      const std::string agg_name = e.contains("aggregate_name") && e["aggregate_name"].is_string() ? e["aggregate_name"].get<std::string>() : "";
      const std::string name = entry_case_name(e);
      if (name.empty()) throw InputError(where + " has no name (not a results file)");
      auto [it, fresh] = acc.try_emplace(name);
      Accum& a = it->second;
      if (fresh) {
        order.push_back(name);
        a.run.name = name;
      }
      CaseRun& r = a.run;
      const bool error = e.value("error_occurred", false) == true;
      if (error) {
        const std::string msg = e.contains("error_message") && e["error_message"].is_string() ? e["error_message"].get<std::string>() : "error";
        if (e.contains("skipped")) {
          if (r.state == CaseRun::State::timed && !a.seen_iteration) r.state = CaseRun::State::skipped, r.message = msg;
        } else if (e.contains("error") && e["error"] == "out of memory") {
          if (r.state != CaseRun::State::failed) r.state = CaseRun::State::oom, r.message = msg;
        } else {
          r.state = CaseRun::State::failed, r.message = msg;
        }
        continue;
      }
      if (e.contains("verified") && e["verified"] == false) {
        r.state = CaseRun::State::failed;
        if (r.message.empty()) r.message = "verification failed";
        continue;
      }
      if (!e.contains(time_key) || !e[time_key].is_number())
        throw InputError(where + " ('" + name + "') has no numeric " + time_key);
      const std::string unit = e.contains("time_unit") && e["time_unit"].is_string() ? e["time_unit"].get<std::string>() : "ns";
      const double t = e[time_key].get<double>();
      auto twice = [&](std::size_t first, const std::string& what) {
        throw InputError(label + ": case '" + name + "' is in the file twice (" + what + " in benchmark entries " +
                         std::to_string(first + 1) + " and " + std::to_string(i + 1) +
                         "); a results file holds each case once: rename or remove one");
      };
      if (run_type == "aggregate") {
        if (const auto [at, added] = a.agg_entry.try_emplace(agg_name, i); !added) twice(at->second, "aggregate " + agg_name);
        // cv is a ratio (aggregate_unit "percentage"); the others are times.
        if (agg_name == "cv") a.agg_cv = t;
        else if (agg_name == "median") a.agg_median = to_us(t, unit, where);
        else if (agg_name == "mean") a.agg_mean = to_us(t, unit, where);
        continue;
      }
      if (e.contains("repetition_index") && e["repetition_index"].is_number()) {
        const auto idx = static_cast<long long>(e["repetition_index"].get<double>());
        if (const auto [at, added] = a.rep_entry.try_emplace(idx, i); !added)
          twice(at->second, "repetition " + std::to_string(idx));
      }
      // Without repetition indices: more repetitions than the entries say the case has.
      if (e.contains("repetitions") && e["repetitions"].is_number()) a.declared_reps = e["repetitions"].get<double>();
      if (++a.timed_entries > 1 && a.declared_reps >= 1 && static_cast<double>(a.timed_entries) > a.declared_reps)
        throw InputError(label + ": case '" + name + "' is in the file twice (benchmark entry " + std::to_string(i + 1) +
                         " is its repetition " + std::to_string(a.timed_entries) + " of " +
                         std::to_string(static_cast<long long>(a.declared_reps)) +
                         "); a results file holds each case once: rename or remove one");
      a.seen_iteration = true;
      if (r.state == CaseRun::State::skipped) r.state = CaseRun::State::timed, r.message.clear();
      if (e.contains("foreign_cpu") && e["foreign_cpu"].is_number()) {
        const double f = e["foreign_cpu"].get<double>();
        if (std::isfinite(f) && !(f <= r.foreign_cpu)) r.foreign_cpu = std::fmin(1.0, std::fmax(0.0, f));
      }
      r.times_us.push_back(to_us(t, unit, where));
    } catch (const json::exception& ex) {  // a key of the wrong type: a foreign or damaged file
      throw InputError(where + ": unexpected content (" + std::string(ex.what()) + ")");
    }
  }
  std::vector<CaseRun> out;
  out.reserve(order.size());
  for (const auto& name : order) {
    Accum& a = acc.at(name);
    CaseRun& r = a.run;
    if (r.state == CaseRun::State::timed) {
      if (r.times_us.empty()) {
        // Only aggregates (--benchmark_report_aggregates_only): one sample, the median.
        const double m = std::isfinite(a.agg_median) ? a.agg_median : a.agg_mean;
        if (!std::isfinite(m)) {
          r.state = CaseRun::State::skipped;
          r.message = "no timing in this run";
        } else {
          r.times_us = {m};
          if (std::isfinite(a.agg_cv)) r.cv = a.agg_cv;
        }
      } else {
        r.cv = stats::cv(r.times_us);
      }
      if (!r.times_us.empty()) r.median_us = stats::median(r.times_us);
    }
    out.push_back(std::move(r));
  }
  return out;
}

namespace {
double case_floor(const CompareOptions& o, const std::string& name) {
  const auto it = o.case_floors.find(name);
  return it != o.case_floors.end() ? it->second : o.noise_floor;
}
}  // namespace

CaseComparison compare_case(const CaseRun* base, const CaseRun* neu, const CompareOptions& opts) {
  using S = CaseRun::State;
  CaseComparison c;
  c.name = neu ? neu->name : base ? base->name : "";
  const bool base_timed = base && base->state == S::timed;
  const bool new_timed = neu && neu->state == S::timed;
  if (base_timed) c.base_us = base->median_us, c.n_base = base->times_us.size();
  if (new_timed) c.new_us = neu->median_us, c.n_new = neu->times_us.size();

  if (neu && neu->state == S::failed) {
    c.verdict = Verdict::failed;
    c.fatal = true;
    c.note = neu->message;
    return c;
  }
  if (neu && neu->state == S::oom) {
    // A case that fit before and no longer does is a regression; one that never fit is not.
    c.verdict = base_timed ? Verdict::failed : Verdict::gone;
    c.fatal = base_timed;
    c.note = base_timed ? "out of memory in NEW (timed in BASE)" : "out of memory";
    return c;
  }
  if (!new_timed) {
    c.verdict = Verdict::gone;
    c.note = !neu ? "not in NEW" : "skipped in NEW: " + neu->message;
    return c;
  }
  if (!base_timed) {
    c.verdict = Verdict::added;
    if (!base) c.note = "not in BASE";
    else if (base->state == S::failed) c.note = "failed in BASE: " + base->message;
    else if (base->state == S::oom) c.note = "out of memory in BASE";
    else c.note = "skipped in BASE";
    return c;
  }

  // Both timed.
  c.ratio = c.new_us / c.base_us;
  const double change = c.ratio - 1;
  const auto mw = stats::mann_whitney_u(neu->times_us, base->times_us);
  c.p = mw.p;
  c.exact = mw.exact;
  c.noise = std::max(base->cv, neu->cv);
  if (std::isfinite(base->foreign_cpu) || std::isfinite(neu->foreign_cpu))
    c.busy = std::fmax(base->foreign_cpu, neu->foreign_cpu);  // fmax: the known one when one is NaN
  const bool significant = mw.p < opts.alpha;
  const double thr = opts.threshold + 1e-9;  // "beyond": exactly +10.0% at a 10% threshold is not, despite rounding
  const std::string within = "within " + fmt_pct(opts.threshold);
  // A clean shift: every NEW repetition beyond every BASE one by more than threshold + noise.
  const auto [bmin, bmax] = std::minmax_element(base->times_us.begin(), base->times_us.end());
  const auto [nmin, nmax] = std::minmax_element(neu->times_us.begin(), neu->times_us.end());
  const double margin = 1 + thr + (std::isfinite(c.noise) ? c.noise : 0);
  const bool enough = c.n_base >= 3 && c.n_new >= 3;
  const bool sep_slower = enough && *nmin > *bmax * margin, sep_faster = enough && *nmax * margin < *bmin;
  c.separated = sep_slower || sep_faster;
  // The median's own uncertainty: standard error of a median of n normal repetitions is
  // 1.2533 sigma / sqrt(n); of the change, the two sides combined. A change must clear the threshold
  // by that much, so a threshold-sized wobble of noisy medians is not called SLOWER at 5 vs 5.
  const double se_margin = 1.2533 * (std::isfinite(c.noise) ? c.noise : 0) *
                           std::sqrt(1.0 / static_cast<double>(c.n_base) + 1.0 / static_cast<double>(c.n_new));
  // A busy machine (compare.h): the load both sides recorded is common-mode; only the difference in
  // the CPU share it left to the case, L = (1 - lighter load) / (1 - heavier load), can explain a
  // change (an unknown side counts as quiet: the whole recorded load may then explain it). A change
  // is judged only beyond L x (1 + threshold + noise): every repetition apart by that much, or the
  // medians apart by that much with p < alpha. The noise is the full cv, not the medians' standard
  // error: repetitions of one run share its load, so they scatter together.
  const bool loaded = std::isfinite(c.busy) && c.busy > opts.max_busy;
  if (std::fabs(change) > thr && loaded) {
    auto share = [](double f) { return std::isfinite(f) ? std::fmin(std::fmax(f, 0.0), 0.95) : 0.0; };
    const double lo = std::fmin(share(base->foreign_cpu), share(neu->foreign_cpu));
    const double hi = std::fmax(share(base->foreign_cpu), share(neu->foreign_cpu));
    const double explain = (1 - lo) / (1 - hi);
    const double floor = c.floor = case_floor(opts, c.name);
    const bool beyond_floor = std::fabs(change) > floor;
    auto used = [](double f) { return std::isfinite(f) ? fmt_pct(f) : std::string("an unknown share (counted as 0%)"); };
    const std::string load = "busy machine (other processes used " + used(base->foreign_cpu) + " of the CPUs in BASE, " +
                             used(neu->foreign_cpu) + " in NEW: " +
                             (explain <= 1 + thr ? std::string("common-mode") : "explains up to " + fmt_change(explain)) + ")";
    const bool apart_slower = enough && *nmin > *bmax * margin * explain, apart_faster = enough && *nmax * margin * explain < *bmin;
    const char* how = "every repetition ";
    if (!apart_slower && !apart_faster) how = "p < alpha and the median ";
    if (beyond_floor && (apart_slower || (significant && c.ratio > explain * margin))) {
      c.verdict = Verdict::slower;
      c.fatal = true;
      c.separated = apart_slower;
      c.note = how + std::string("slower beyond what the load and noise explain; ") + load;
    } else if (beyond_floor && (apart_faster || (significant && c.ratio * explain * margin < 1))) {
      c.verdict = Verdict::faster;
      c.separated = apart_faster;
      c.note = how + std::string("faster beyond what the load and noise explain; ") + load;
    } else {
      c.verdict = Verdict::noisy;
      c.note = load + ": the change is not beyond it and the noise (limit --max-busy " + fmt_pct(opts.max_busy) +
               "); rerun on a quiet machine";
    }
  } else if (const double floor = c.floor = case_floor(opts, c.name); std::fabs(change) > thr && std::fabs(change) <= floor) {
    c.verdict = Verdict::noisy;
    c.note = "within the between-run noise floor " + fmt_pct(floor) +
             (opts.case_floors.count(c.name) ? " (learned from " + std::to_string(opts.floor_runs) + " runs)" : " (--noise-floor)");
  } else if ((significant && change > thr + se_margin) || sep_slower) {
    c.verdict = Verdict::slower;
    c.fatal = true;
    if (!significant) c.note = "every repetition slower than every BASE one by more than threshold + noise";
  } else if ((significant && change < -thr - se_margin) || sep_faster) {
    c.verdict = Verdict::faster;
    if (!significant) c.note = "every repetition faster than every BASE one by more than threshold + noise";
  } else if (std::fabs(change) > thr) {
    c.verdict = Verdict::noisy;
    if (stats::mann_whitney_min_p(c.n_new, c.n_base) >= opts.alpha)
      c.note = std::to_string(c.n_base) + " vs " + std::to_string(c.n_new) + " repetitions cannot reach p < " +
               fmt_number(opts.alpha, 3) + " (use --repetitions 5 or more)";
    else
      c.note = "change not significant";
  } else if (c.noise > thr) {
    c.verdict = Verdict::noisy;
    c.note = "noise band wider than the threshold";
  } else {
    c.verdict = Verdict::same;
    if (significant && change != 0) c.note = "significant, but " + within;
  }
  return c;
}

bool Comparison::regression() const {
  for (const auto& c : cases)
    if (c.fatal) return true;
  return false;
}

std::size_t Comparison::inconclusive() const {
  std::size_t n = 0;
  for (const auto& c : cases) n += c.verdict == Verdict::noisy;
  return n;
}

std::string Comparison::inconclusive_line() const {
  std::string names;
  std::size_t shown = 0, n = 0;
  for (const auto& c : cases) {
    if (c.verdict != Verdict::noisy) continue;
    if (++n <= 10) names += (shown++ ? ", " : "") + c.name + " (" + fmt_change(c.ratio) + ")";
  }
  if (n > shown) names += ", and " + std::to_string(n - shown) + " more";
  std::string line = "inconclusive: " + std::to_string(n) + " case(s) NOISY, not judged: " + names +
                     "; rerun them on a quieter machine or with more --repetitions";
  for (char& ch : line)
    if (ch == '\n' || ch == '\r') ch = ' ';
  return line;
}

std::string Comparison::regression_line() const {
  std::vector<std::string> slower, failed;
  for (const auto& c : cases) {
    if (!c.fatal) continue;
    if (c.verdict == Verdict::slower) slower.push_back(c.name + " (" + fmt_change(c.ratio) + ")");
    else failed.push_back(c.name + (c.note.empty() ? "" : " (" + c.note + ")"));
  }
  auto list = [](const std::vector<std::string>& v) {
    const std::size_t shown = std::min<std::size_t>(v.size(), 20);
    std::string s;
    for (std::size_t i = 0; i < shown; ++i) s += (i ? ", " : "") + v[i];
    if (v.size() > shown) s += ", and " + std::to_string(v.size() - shown) + " more";
    return s;
  };
  std::string line = "regression:";
  if (!slower.empty())
    line += " " + std::to_string(slower.size()) + " case(s) slower than +" + fmt_pct(opts.threshold) + " with p < " +
            fmt_number(opts.alpha, 3) + " or every repetition slower: " + list(slower);
  if (!failed.empty()) line += std::string(slower.empty() ? "" : ";") + " " + std::to_string(failed.size()) + " case(s) failed in NEW: " + list(failed);
  for (char& ch : line)
    if (ch == '\n' || ch == '\r') ch = ' ';  // one line, whatever the error messages hold
  return line;
}

Comparison compare_runs(const json& base, const std::string& base_label, const json& neu, const std::string& new_label,
                        const CompareOptions& opts) {
  Comparison out;
  out.opts = opts;
  out.base_label = base_label;
  out.new_label = new_label;
  out.base_about = describe_run(base);
  out.new_about = describe_run(neu);
  const std::string bk = machine_key_or_empty(base), nk = machine_key_or_empty(neu);
  out.different_machines = !bk.empty() && !nk.empty() && bk != nk;
  const auto b = extract_cases(base, base_label, opts.time);
  const auto n = extract_cases(neu, new_label, opts.time);
  std::map<std::string, const CaseRun*> by_name;
  for (const auto& r : b) by_name[r.name] = &r;
  std::map<std::string, bool> in_new;
  auto skipped_or_absent = [](const CaseRun* r) { return !r || r->state == CaseRun::State::skipped; };
  for (const auto& r : n) {
    in_new[r.name] = true;
    const auto it = by_name.find(r.name);
    const CaseRun* br = it == by_name.end() ? nullptr : it->second;
    if (r.state == CaseRun::State::skipped && skipped_or_absent(br)) {
      ++out.skipped_both;
      continue;
    }
    out.cases.push_back(compare_case(br, &r, opts));
  }
  for (const auto& r : b) {
    if (in_new.count(r.name)) continue;
    if (r.state == CaseRun::State::skipped) {
      ++out.skipped_both;
      continue;
    }
    out.cases.push_back(compare_case(&r, nullptr, opts));
  }
  std::vector<double> ratios;
  for (const auto& c : out.cases)
    if (std::isfinite(c.ratio) && c.ratio > 0) ratios.push_back(c.ratio);
  out.shared = ratios.size();
  out.geomean_ratio = stats::geomean(ratios);
  return out;
}

void print_comparison(std::ostream& out, const Comparison& c) {
  out << "BASE: " << c.base_label << " (" << c.base_about << ")\n";
  out << "NEW:  " << c.new_label << " (" << c.new_about << ")\n";
  out << "time: " << (c.opts.time == TimeField::cpu ? "cpu_time" : "real_time") << " medians; threshold "
      << fmt_pct(c.opts.threshold) << ", alpha " << fmt_number(c.opts.alpha, 3)
      << ", max busy " << fmt_pct(c.opts.max_busy)
      << (c.opts.floor_runs ? ", noise floor per case from " + std::to_string(c.opts.floor_runs) + " runs"
                            : c.opts.noise_floor > 0 ? ", noise floor " + fmt_pct(c.opts.noise_floor) : std::string())
      << "; p: two-sided Mann-Whitney U over the repetitions ((z): normal approximation); noise: larger cv of the two "
         "sides; busy: largest share of the CPUs other processes used while either side was timed\n";
  if (c.different_machines) out << "note: BASE and NEW come from different machines (a hardware comparison, not a regression check)\n";
  out << "\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& k : c.cases) {
    const std::string reps = k.n_base || k.n_new ? std::to_string(k.n_base) + "/" + std::to_string(k.n_new) : "-";
    rows.push_back({k.name, fmt_seconds(k.base_us * 1e-6), fmt_seconds(k.new_us * 1e-6), fmt_change(k.ratio), reps,
                    fmt_p(k.p, k.exact), fmt_pct(k.noise), fmt_pct(k.busy), verdict_name(k.verdict),
                    k.note});
  }
  print_table(out, {"case", "BASE median", "NEW median", "change", "reps", "p", "noise (cv)", "busy", "verdict", "note"}, rows);
  out << "\n";
  if (c.shared)
    out << "geomean NEW/BASE over " << c.shared << " shared case(s): " << fmt_number(c.geomean_ratio, 4) << " ("
        << fmt_change(c.geomean_ratio) << ")\n";
  else
    out << "no case was timed in both runs\n";
  std::map<std::string, int> counts;
  for (const auto& k : c.cases) ++counts[verdict_name(k.verdict)];
  out << "verdicts:";
  bool first = true;
  for (const char* v : {"SLOWER", "FAILED", "FASTER", "SAME", "NOISY", "NEW", "GONE"})
    if (counts[v]) out << (first ? " " : ", ") << counts[v] << " " << v, first = false;
  if (first) out << " none";
  if (c.skipped_both) out << " (" << c.skipped_both << " case(s) skipped in both runs left out)";
  out << "\n";
  // The last line is the verdict of the whole comparison, and agrees with the exit code (1, 3, 0).
  if (c.regression())
    out << "REGRESSION: " << c.regression_line().substr(std::string("regression: ").size())
        << (c.inconclusive() ? " (and " + std::to_string(c.inconclusive()) + " case(s) NOISY)" : std::string()) << "\n";
  else if (c.inconclusive())
    out << "INCONCLUSIVE: " << c.inconclusive_line().substr(std::string("inconclusive: ").size()) << "\n";
  else
    out << "no regression\n";
}

json comparison_json(const Comparison& c) {
  auto num = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  json cases = json::array();
  for (const auto& k : c.cases)
    cases.push_back({{"name", k.name},         {"verdict", verdict_name(k.verdict)}, {"base_median_us", num(k.base_us)},
                     {"new_median_us", num(k.new_us)}, {"ratio", num(k.ratio)},      {"p", num(k.p)},
                     {"exact", k.exact},       {"n_base", k.n_base},                {"n_new", k.n_new},
                     {"noise", num(k.noise)},  {"busy", num(k.busy)},              {"separated", k.separated}, {"floor", k.floor},
                     {"regression", k.fatal},  {"note", k.note}});
  return {{"base", {{"path", c.base_label}, {"about", c.base_about}}},
          {"new", {{"path", c.new_label}, {"about", c.new_about}}},
          {"time", c.opts.time == TimeField::cpu ? "cpu_time" : "real_time"},
          {"threshold", c.opts.threshold},
          {"alpha", c.opts.alpha},
          {"max_busy", c.opts.max_busy},
          {"noise_floor", c.opts.noise_floor},
          {"floor_runs", c.opts.floor_runs},
          {"cases", cases},
          {"shared", c.shared},
          {"skipped_both", c.skipped_both},
          {"geomean_ratio", num(c.geomean_ratio)},
          {"different_machines", c.different_machines},
          {"regression", c.regression()},
          {"inconclusive", c.inconclusive()},
          {"outcome", c.regression() ? "regression" : c.inconclusive() ? "inconclusive" : "no regression"}};
}

namespace {
bool parse_number(const std::string& s, double& v) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s.front()))) return false;
  if (s.find_first_not_of("0123456789.eE+-") != std::string::npos) return false;  // decimal only: no hex, inf, nan
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(v);
}
}  // namespace

double parse_threshold(const std::string& text, const std::string& flag) {
  const std::string bad = flag + " '" + text + "': ";
  double v = 0;
  if (!text.empty() && text.back() == '%') {
    if (!parse_number(text.substr(0, text.size() - 1), v)) throw UsageError(bad + "not a percentage (e.g. 5%)");
    v /= 100;
  } else {
    if (!parse_number(text, v)) throw UsageError(bad + "expected a percentage (5%) or a fraction (0.05)");
    if (v >= 1) throw UsageError(bad + "ambiguous; write a percentage (" + text + "%) or a fraction below 1 (0.05)");
  }
  if (v < 0) throw UsageError(bad + "must not be negative");
  return v;
}

double parse_max_busy(const std::string& text, const std::string& flag) {
  double v = 0;
  const bool pct = !text.empty() && text.back() == '%';
  const bool ok = parse_number(pct ? text.substr(0, text.size() - 1) : text, v);
  if (pct) v /= 100;
  if (!ok || !(v >= 0 && v <= 1))
    throw UsageError(flag + " '" + text + "': expected a share of the CPUs from 0% to 100% (e.g. 10% or 0.1)");
  return v;
}

double parse_alpha(const std::string& text, const std::string& flag) {
  double v = 0;
  if (!parse_number(text, v) || !(v > 0 && v < 1))
    throw UsageError(flag + " '" + text + "': expected a significance level between 0 and 1 (e.g. 0.05)");
  return v;
}

TimeField parse_time_field(const std::string& text) {
  if (text == "real" || text == "real_time") return TimeField::real;
  if (text == "cpu" || text == "cpu_time") return TimeField::cpu;
  throw UsageError("--time '" + text + "': expected real or cpu");
}

std::string machine_key_or_empty(const json& doc) {
  if (!doc.contains("context") || !doc["context"].is_object()) return "";
  const json& ctx = doc["context"];
  if (!ctx.contains("cpu") || !ctx.contains("openblas") || !ctx.contains("cuda")) return "";
  try {
    return machine_key(ctx);
  } catch (const json::exception&) {
    return "";
  }
}

std::string describe_run(const json& doc) {
  std::string s;
  const json ctx = doc.contains("context") && doc["context"].is_object() ? doc["context"] : json::object();
  if (ctx.contains("date") && ctx["date"].is_string()) s += ctx["date"].get<std::string>();
  if (ctx.contains("git") && ctx["git"].is_object() && ctx["git"].contains("sha") && ctx["git"]["sha"].is_string()) {
    const std::string sha = ctx["git"]["sha"].get<std::string>();
    s += (s.empty() ? "" : ", ") + std::string("git ") + sha.substr(0, 10) +
         (ctx["git"].contains("dirty") && ctx["git"]["dirty"] == true ? " (dirty)" : "");
  }
  const std::string key = machine_key_or_empty(doc);
  s += (s.empty() ? "" : ", ") + (key.empty() ? std::string("no machine fingerprint") : key);
  return s;
}

}  // namespace dlb::harness
