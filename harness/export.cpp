// The trackers' formats of one run (see export.h). The numbers come from compare's reading of the
// file (extract_cases: the same cases, states and repetition times a `compare` judges), the units and
// throughput from the records' metric table (records.h).
#include "harness/export.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "harness/compare.h"
#include "kernels/common/errors.h"

namespace dlb::harness {

using json = nlohmann::json;

namespace {

struct FormatName {
  const char* name;
  ExportFormat format;
};
constexpr FormatName kFormats[] = {
    {"github-action-benchmark-bigger", ExportFormat::gab_bigger},
    {"github-action-benchmark-smaller", ExportFormat::gab_smaller},
    {"bencher", ExportFormat::bencher},
    {"csv", ExportFormat::csv},
};

std::string num(double v, const char* f = "%.6g") {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

const char* state_name(CaseRun::State s) {
  switch (s) {
    case CaseRun::State::timed: return "timed";
    case CaseRun::State::failed: return "failed";
    case CaseRun::State::oom: return "oom";
    case CaseRun::State::skipped: return "skipped";
  }
  return "failed";
}

std::string str_key(const json& e, const char* k) { return e.contains(k) && e[k].is_string() ? e[k].get<std::string>() : ""; }

double num_key(const json& e, const char* k) {
  return e.contains(k) && e[k].is_number() ? e[k].get<double>() : std::numeric_limits<double>::quiet_NaN();
}

// Throughput x time is the work of one iteration in the metric's unit: taken from the median
// aggregate when there is one (else any timed entry), it turns each repetition's time into a rate.
void add_throughput(ExportCase& c, const std::vector<const json*>& entries, const std::string& label) {
  const json* best = nullptr;
  for (const json* e : entries) {
    if (e->value("error_occurred", false) == true || !entry_metric(*e) || !std::isfinite(num_key(*e, "real_time"))) continue;
    if (!best || str_key(*e, "aggregate_name") == "median") best = e;
  }
  if (best) {
    c.metric = entry_metric(*best);
    const double t = to_us(num_key(*best, "real_time"), best->contains("time_unit") ? str_key(*best, "time_unit") : "us",
                           label + ": case '" + c.name + "'");
    const double work = (*best)[c.metric->key].get<double>() * t;  // metric unit x us
    c.value = work / c.time_us, c.lower = work / c.time_max_us, c.upper = work / c.time_min_us;
  } else {  // no throughput recorded: iterations per second
    c.value = 1e6 / c.time_us, c.lower = 1e6 / c.time_max_us, c.upper = 1e6 / c.time_min_us;
  }
}

void add_measures(ExportCase& c, const std::vector<const json*>& entries) {
  auto first = [&](const char* key, const char* scope_key = nullptr, const char* scope = nullptr) {
    for (const json* e : entries) {
      if (!std::isfinite(num_key(*e, key))) continue;
      if (scope_key && str_key(*e, scope_key) != scope) continue;
      return num_key(*e, key);
    }
    return std::numeric_limits<double>::quiet_NaN();
  };
  const std::pair<const char*, double> m[] = {
      {"host-peak-rss-bytes", first("host_peak_rss_bytes", "host_peak_rss_scope", "case")},  // a window's or the process's is not the case's
      {"device-peak-bytes", first("peak_device_bytes")},
      {"energy-joules", first("energy_j")},
  };
  for (const auto& [k, v] : m)
    if (std::isfinite(v)) c.measures.emplace_back(k, v);
}

const char* unit_of(const ExportCase& c) { return c.metric ? c.metric->unit : "iter/s"; }

std::string about(const json& doc) {
  std::string s;
  if (const std::string key = machine_key_or_empty(doc); !key.empty()) s += "\nmachine: " + key;
  if (doc.contains("context") && doc["context"].is_object()) {
    const json& ctx = doc["context"];
    if (ctx.contains("git") && ctx["git"].is_object()) {
      const std::string sha = str_key(ctx["git"], "sha");
      if (!sha.empty()) s += "\ngit: " + sha.substr(0, 12) + (ctx["git"].value("dirty", false) == true ? " (dirty)" : "");
    }
  }
  return s;
}

json gab_entries(const std::vector<ExportCase>& cases, bool bigger, const json& doc) {
  json out = json::array();
  const std::string tail = about(doc);
  for (const auto& c : cases) {
    if (c.state != "timed") continue;
    const std::string reps = std::to_string(c.repetitions) + " repetition" + (c.repetitions == 1 ? "" : "s");
    const std::string rate = num(c.value) + " " + unit_of(c) + " (" + num(c.lower) + " .. " + num(c.upper) + ")";
    const std::string time = num(c.time_us) + " us (" + num(c.time_min_us) + " .. " + num(c.time_max_us) + ")";
    json e = {{"name", c.name}};
    if (bigger) {
      e["value"] = c.value;
      e["unit"] = unit_of(c);
      e["range"] = "± " + num((c.upper - c.lower) / 2);
      e["extra"] = "median of " + reps + ", slowest .. fastest in ()\ntime per iteration: " + time + tail;
    } else {
      e["value"] = c.time_us;
      e["unit"] = "us/iter";
      e["range"] = "± " + num((c.time_max_us - c.time_min_us) / 2);
      e["extra"] = "median of " + reps + ", fastest .. slowest in ()\nthroughput: " + rate + tail;
    }
    out.push_back(std::move(e));
  }
  return out;
}

json bencher_doc(const std::vector<ExportCase>& cases) {
  json out = json::object();
  for (const auto& c : cases) {
    if (c.state != "timed") continue;
    json m = json::object();
    // Bencher's built-in latency measure is in nanoseconds.
    m["latency"] = {{"value", c.time_us * 1e3}, {"lower_value", c.time_min_us * 1e3}, {"upper_value", c.time_max_us * 1e3}};
    std::string slug = std::string("throughput-") + (c.metric ? c.metric->key : "iter_per_s");  // unit in the name
    std::replace(slug.begin(), slug.end(), '_', '-');
    m[slug] = {{"value", c.value}, {"lower_value", c.lower}, {"upper_value", c.upper}};
    for (const auto& [k, v] : c.measures) m[k] = {{"value", v}};
    out[c.name] = std::move(m);
  }
  return out;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

std::string csv_text(const std::vector<ExportCase>& cases) {
  std::string out = "name,suite,op,device,dtype,state,repetitions,value,lower,upper,unit,time_us,time_min_us,time_max_us,message\n";
  auto n = [](double v) { return std::isfinite(v) ? num(v, "%.9g") : std::string(); };
  for (const auto& c : cases) {
    const bool t = c.state == "timed";
    for (const std::string& f : {c.name, c.suite, c.op, c.device, c.dtype, c.state}) out += csv_field(f) + ",";
    out += std::to_string(c.repetitions) + "," + n(c.value) + "," + n(c.lower) + "," + n(c.upper) + "," +
           (t ? std::string(unit_of(c)) : "") + "," + n(c.time_us) + "," + n(c.time_min_us) + "," + n(c.time_max_us) + "," +
           csv_field(c.message) + "\n";
  }
  return out;
}

}  // namespace

const char* export_format_names() {
  return "github-action-benchmark-bigger|github-action-benchmark-smaller|bencher|csv";
}

ExportFormat parse_export_format(const std::string& name) {
  for (const auto& f : kFormats)
    if (name == f.name) return f.format;
  throw UsageError("--format '" + name + "': expected " + export_format_names());
}

std::vector<ExportCase> export_cases(const json& doc, const std::string& label) {
  const std::vector<CaseRun> runs = extract_cases(doc, label, TimeField::real);
  std::map<std::string, std::vector<const json*>> entries;
  for (const json& e : doc.at("benchmarks")) entries[entry_case_name(e)].push_back(&e);
  std::vector<ExportCase> out;
  for (const CaseRun& r : runs) {
    ExportCase c;
    c.name = r.name;
    const auto& es = entries[r.name];
    const json& first = *es.front();
    c.suite = str_key(first, "suite"), c.op = str_key(first, "op"), c.device = str_key(first, "device"),
    c.dtype = str_key(first, "dtype");
    c.state = state_name(r.state);
    c.message = r.message;
    c.repetitions = r.times_us.size();
    if (r.state == CaseRun::State::timed) {
      c.time_us = r.median_us;
      c.time_min_us = *std::min_element(r.times_us.begin(), r.times_us.end());
      c.time_max_us = *std::max_element(r.times_us.begin(), r.times_us.end());
      add_throughput(c, es, label);
      add_measures(c, es);
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::string export_text(const std::vector<ExportCase>& cases, ExportFormat format, const json& doc) {
  switch (format) {
    case ExportFormat::gab_bigger: return gab_entries(cases, true, doc).dump(2) + "\n";
    case ExportFormat::gab_smaller: return gab_entries(cases, false, doc).dump(2) + "\n";
    case ExportFormat::bencher: return bencher_doc(cases).dump(2) + "\n";
    case ExportFormat::csv: return csv_text(cases);
  }
  return "";
}

}  // namespace dlb::harness
