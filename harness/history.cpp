// Trend over many runs of one machine (see history.h).
#include "harness/history.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <limits>
#include <map>
#include <ostream>

#include "harness/results.h"
#include "harness/stats.h"
#include "harness/tables.h"
#include "kernels/common/errors.h"

namespace fs = std::filesystem;

namespace dlb::harness {

using json = nlohmann::json;

double parse_date(const std::string& s) {
  // Strictly "YYYY-MM-DDTHH:MM:SS", optional fractional seconds, then "Z", "+HH", "+HHMM", "+HH:MM" or
  // nothing (UTC); every field in its range (month 13 or hour 99 is no date, not a normalised one).
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::size_t at = 0;
  auto num = [&](std::size_t digits, int& v) {
    v = 0;
    for (std::size_t k = 0; k < digits; ++k, ++at) {
      if (at >= s.size() || !std::isdigit(static_cast<unsigned char>(s[at]))) return false;
      v = v * 10 + (s[at] - '0');
    }
    return true;
  };
  auto lit = [&](char c) { return at < s.size() && s[at++] == c; };
  int Y, M, D, h, m, sec;
  if (!(num(4, Y) && lit('-') && num(2, M) && lit('-') && num(2, D) && lit('T') && num(2, h) && lit(':') && num(2, m) &&
        lit(':') && num(2, sec)))
    return nan;
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (Y % 4 == 0 && Y % 100 != 0) || Y % 400 == 0;
  if (M < 1 || M > 12 || D < 1 || D > kDays[M - 1] + (M == 2 && leap) || h > 23 || m > 59 || sec > 60) return nan;
  if (at < s.size() && s[at] == '.') {  // fractional seconds: ignored
    ++at;
    const std::size_t first = at;
    while (at < s.size() && std::isdigit(static_cast<unsigned char>(s[at]))) ++at;
    if (at == first) return nan;
  }
  std::tm tm{};
  tm.tm_year = Y - 1900, tm.tm_mon = M - 1, tm.tm_mday = D, tm.tm_hour = h, tm.tm_min = m, tm.tm_sec = sec;
  double t = static_cast<double>(timegm(&tm));
  if (at == s.size() || (s[at] == 'Z' && at + 1 == s.size())) return t;
  const char sign = s[at++];
  int oh = 0, om = 0;
  if ((sign != '+' && sign != '-') || !num(2, oh)) return nan;
  const bool colon = at < s.size() && s[at] == ':';
  if (colon) ++at;
  if ((colon || at < s.size()) && !num(2, om)) return nan;
  if (at != s.size() || oh > 14 || om > 59) return nan;
  const double off = (oh * 60.0 + om) * 60.0;
  return t + (sign == '+' ? -off : off);  // local = UTC + offset
}

Step detect_step(const std::vector<double>& values, const std::vector<double>& noise, std::size_t min_segment,
                 double threshold) {
  Step best;
  const std::size_t T = values.size();
  if (min_segment == 0 || T < 2 * min_segment) return best;
  std::vector<double> y(T), prefix(T + 1, 0.0);
  for (std::size_t i = 0; i < T; ++i) {
    if (!(values[i] > 0)) return best;
    y[i] = std::log(values[i]);
    prefix[i + 1] = prefix[i] + y[i];
  }
  double best_d = 0;
  std::size_t best_k = 0;
  for (std::size_t k = min_segment; k + min_segment <= T; ++k) {
    const double d = (prefix[T] - prefix[k]) / static_cast<double>(T - k) - prefix[k] / static_cast<double>(k);
    if (best_k == 0 || std::fabs(d) > std::fabs(best_d)) best_d = d, best_k = k;
  }
  // Pooled standard deviation within the two segments (T - 2 degrees of freedom).
  const double mean_l = prefix[best_k] / static_cast<double>(best_k);
  const double mean_r = (prefix[T] - prefix[best_k]) / static_cast<double>(T - best_k);
  double ss = 0;
  for (std::size_t i = 0; i < T; ++i) ss += (y[i] - (i < best_k ? mean_l : mean_r)) * (y[i] - (i < best_k ? mean_l : mean_r));
  double s = std::sqrt(ss / static_cast<double>(T - 2));
  if (!noise.empty()) s = std::max(s, stats::median(noise));  // relative error ~ error of log(time)
  s = std::max(s, 1e-12);
  const double se = s * std::sqrt(1.0 / static_cast<double>(best_k) + 1.0 / static_cast<double>(T - best_k));
  best.at = best_k;
  best.ratio = std::exp(best_d);
  best.score = std::fabs(best_d) / se;
  best.found = std::fabs(best.ratio - 1) > threshold && best.score > 3;
  return best;
}

namespace {

struct Loaded {
  std::string path, date, key, git;
  double when = 0;
  std::vector<CaseRun> cases;
};

bool is_run_candidate(const fs::directory_entry& ent) {
  std::error_code ec;
  if (ent.is_directory(ec))
    return fs::exists(ent.path() / "results.json", ec) || fs::exists(ent.path() / "results.jsonl", ec);
  const std::string ext = ent.path().extension().string();
  return ent.is_regular_file(ec) && (ext == ".json" || ext == ".jsonl");
}

}  // namespace

namespace {

// Every run in `dir` with a date, sorted by it; what was left out goes to *warnings (strict: an entry
// that is no folder or file, or a run that does not load, is an InputError instead).
std::vector<Loaded> load_runs(const std::string& dir, const HistoryOptions& opts, std::vector<std::string>* warnings) {
  std::error_code ec;
  if (dir.empty()) throw UsageError("history: empty folder name");
  if (!fs::exists(dir, ec)) throw InputError(dir + ": no such folder");
  if (!fs::is_directory(dir, ec)) throw InputError(dir + ": not a folder (history reads a folder of results folders)");
  std::vector<fs::path> candidates;
  for (const auto& ent : fs::directory_iterator(dir, ec)) {
    if (is_run_candidate(ent)) candidates.push_back(ent.path());
    else if (opts.strict && !ent.is_directory(ec) && !ent.is_regular_file(ec))
      throw InputError(ent.path().string() + ": not a results folder or file (a FIFO, socket or device) in the history folder");
  }
  std::sort(candidates.begin(), candidates.end());

  std::vector<Loaded> runs;
  for (const auto& p : candidates) {
    try {
      const json doc = load_results(p.string());
      Loaded r;
      r.path = p.string();
      const json& ctx = doc["context"];
      r.date = ctx.contains("date") && ctx["date"].is_string() ? ctx["date"].get<std::string>() : "";
      r.when = parse_date(r.date);
      if (!std::isfinite(r.when)) {
        warnings->push_back(r.path + (r.date.empty() ? std::string(": no context.date")
                                                     : ": context.date '" + r.date.substr(0, 40) + "' is not a valid date") +
                            "; left out");
        continue;
      }
      r.key = machine_key_or_empty(doc);
      if (ctx.contains("git") && ctx["git"].is_object() && ctx["git"].contains("sha") && ctx["git"]["sha"].is_string())
        r.git = ctx["git"]["sha"].get<std::string>().substr(0, 10);
      r.cases = extract_cases(doc, r.path, opts.time);
      runs.push_back(std::move(r));
    } catch (const InputError& e) {
      if (opts.strict) throw;
      warnings->push_back(std::string(e.what()) + "; left out");
    }
  }
  if (runs.empty())  // the first reason a run was left out is the one to fix
    throw InputError(dir + ": no readable results folders (with results.json and a date) in this folder" +
                     (warnings->empty() ? std::string() : "; " + warnings->front()));
  std::stable_sort(runs.begin(), runs.end(), [](const Loaded& a, const Loaded& b) { return a.when < b.when; });
  return runs;
}

// The trend of one machine's runs (sorted by date).
History build_history(std::string key, std::vector<Loaded> mine, const HistoryOptions& opts) {
  History h;
  h.key = std::move(key);
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < mine.size(); ++i) {
    h.runs.push_back({mine[i].path, mine[i].date, mine[i].git, mine[i].when});
    for (const auto& c : mine[i].cases) {
      auto [it, fresh] = index.try_emplace(c.name, h.cases.size());
      if (fresh) h.cases.push_back(CaseTrend{c.name, {}, {}, {}, {}, false});
      CaseTrend& t = h.cases[it->second];
      if (c.state == CaseRun::State::timed) {
        t.runs.push_back(i);
        t.medians_us.push_back(c.median_us);
        // Standard error of a median of n repetitions: 1.2533 sigma / sqrt(n) (normal data).
        t.noise.push_back(1.2533 * stats::robust_cv(c.times_us) / std::sqrt(static_cast<double>(c.times_us.size())));
      }
      if (i + 1 == mine.size() && c.state == CaseRun::State::failed) t.failed_latest = true;
    }
  }
  for (auto& t : h.cases) t.step = detect_step(t.medians_us, t.noise, opts.min_segment, opts.threshold);
  return h;
}

}  // namespace

History load_history(const std::string& dir, const HistoryOptions& opts) {
  std::vector<std::string> warnings;
  std::vector<Loaded> runs = load_runs(dir, opts, &warnings);
  // One machine: the latest run's.
  const std::string key = runs.back().key;
  std::size_t others = 0;
  std::vector<Loaded> mine;
  for (auto& r : runs) {
    if (r.key == key) mine.push_back(std::move(r));
    else ++others;
  }
  if (others)
    warnings.push_back(std::to_string(others) + " run(s) of other machines left out (history follows the latest run's machine)");
  History h = build_history(key, std::move(mine), opts);
  h.warnings = std::move(warnings);
  return h;
}

std::vector<History> load_histories(const std::string& dir, const HistoryOptions& opts) {
  std::vector<std::string> warnings;
  std::vector<Loaded> runs = load_runs(dir, opts, &warnings);
  std::map<std::string, std::vector<Loaded>> by_key;
  std::vector<std::string> order;  // machines by their latest run, newest first
  for (auto it = runs.rbegin(); it != runs.rend(); ++it)
    if (by_key.find(it->key) == by_key.end()) order.push_back(it->key), by_key[it->key];
  for (auto& r : runs) by_key[r.key].push_back(std::move(r));
  std::vector<History> out;
  for (const auto& k : order) out.push_back(build_history(k, std::move(by_key[k]), opts));
  out.front().warnings = std::move(warnings);
  return out;
}

void print_history(std::ostream& out, const History& h, const HistoryOptions& opts) {
  for (const auto& w : h.warnings) out << "note: " << w << "\n";
  out << "history: " << h.runs.size() << " run(s) of " << (h.key.empty() ? "an unknown machine" : h.key) << "\n";
  for (std::size_t i = 0; i < h.runs.size(); ++i)
    out << "  run " << i + 1 << ": " << h.runs[i].date << (h.runs[i].git.empty() ? "" : "  git " + h.runs[i].git) << "  "
        << h.runs[i].path << "\n";
  out << "time: " << (opts.time == TimeField::cpu ? "cpu_time" : "real_time") << " median per run; step: a sustained shift (segments of >= "
      << opts.min_segment << " runs) beyond " << fmt_number(100 * opts.threshold, 3) << "% and 3 standard errors of the noise\n\n";
  std::vector<std::vector<std::string>> rows;
  std::size_t steps = 0;
  for (const auto& t : h.cases) {
    std::string first = "-", latest = "-", change = "-", best = "-", worst = "-", step = "-";
    if (!t.medians_us.empty()) {
      first = fmt_seconds(t.medians_us.front() * 1e-6);
      latest = fmt_seconds(t.medians_us.back() * 1e-6);
      change = fmt_change(t.medians_us.back() / t.medians_us.front());
      best = fmt_seconds(*std::min_element(t.medians_us.begin(), t.medians_us.end()) * 1e-6);
      worst = fmt_seconds(*std::max_element(t.medians_us.begin(), t.medians_us.end()) * 1e-6);
    }
    if (t.step.found) {
      ++steps;
      const std::size_t run = t.runs[t.step.at];
      step = fmt_change(t.step.ratio) + " from run " + std::to_string(run + 1) + " (" + h.runs[run].date + ")";
    }
    if (t.failed_latest) step = (step == "-" ? "" : step + "; ") + "FAILED in the latest run";
    rows.push_back({t.name, std::to_string(t.medians_us.size()), first, latest, change, best, worst, step});
  }
  print_table(out, {"case", "runs", "first", "latest", "latest vs first", "best", "worst", "step"}, rows);
  out << "\n" << steps << " case(s) with a step\n";
}

json history_json(const History& h) {
  json runs = json::array(), cases = json::array();
  for (const auto& r : h.runs) runs.push_back({{"path", r.path}, {"date", r.date}, {"git", r.git}});
  for (const auto& t : h.cases) {
    json step = nullptr;
    if (t.step.found) step = {{"run", t.runs[t.step.at] + 1}, {"ratio", t.step.ratio}, {"score", t.step.score}};
    json runs_1 = json::array();
    for (auto i : t.runs) runs_1.push_back(i + 1);
    cases.push_back({{"name", t.name}, {"runs", runs_1}, {"median_us", t.medians_us}, {"noise", t.noise}, {"step", step},
                     {"failed_latest", t.failed_latest}});
  }
  return {{"machine", h.key}, {"runs", runs}, {"cases", cases}, {"warnings", h.warnings}};
}

std::map<std::string, double> learned_floors(const std::string& dir, TimeField time, std::size_t* runs) {
  HistoryOptions o;
  o.time = time;
  const History h = load_history(dir, o);
  if (h.runs.size() < 3)
    throw InputError("--noise-floor " + dir + ": " + std::to_string(h.runs.size()) +
                     " usable run(s) of this machine; a floor needs 3 or more");
  if (runs) *runs = h.runs.size();
  std::map<std::string, double> out;
  for (const auto& c : h.cases) {
    if (c.medians_us.size() < 3) continue;
    const auto [lo, hi] = std::minmax_element(c.medians_us.begin(), c.medians_us.end());
    if (*lo > 0) out[c.name] = *hi / *lo - 1;
  }
  return out;
}

}  // namespace dlb::harness
