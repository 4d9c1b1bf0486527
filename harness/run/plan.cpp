// Suites -> cases, and --resume's checks (see plan.h).
#include "harness/run/plan.h"

#include <regex>
#include <set>

#include "harness/resume.h"
#include "harness/sweep.h"
#include "kernels/common/errors.h"

namespace dlb::harness {

using json = nlohmann::json;

const bench::Suite& suite_named(const std::string& name) {
  if (const bench::Suite* s = bench::find_suite(name)) return *s;
  std::string known;
  for (const bench::Suite* x : bench::all_suites()) known += (known.empty() ? "" : ", ") + x->name;
  throw UsageError("--suite '" + name + "': unknown suite (known: " + known + ")");
}

Plan plan_run(const RunOptions& opts) {
  Plan p;
  p.devices = resolve_devices(opts.device, &p.device_note);
  std::regex filter;
  if (!opts.filter.empty()) filter = compile_filter(opts.filter);  // bounded: sweep.h
  std::size_t expanded = 0;                                          // before --filter
  for (const auto& name : opts.suites) {
    const bench::Suite& s = suite_named(name);
    p.distributed |= s.distributed;
    // The overrides of the axes this suite declares (a flag it does not take was refused already).
    json overrides = json::object();
    for (const auto& [k, v] : opts.overrides.items())
      for (const auto& a : s.axes)
        if (a.name == k) overrides[k] = v;
    bench::SuiteOptions so = s.options(opts.quick, overrides);
    so.devices = p.devices;
    so.extra = opts.extra;
    so.repetitions = opts.repetitions;
    for (auto& c : s.expand(so)) {
      ++expanded;
      if (opts.filter.empty() || std::regex_search(c.id.name(), filter)) {
        p.names.push_back(c.id.name());
        p.cases.emplace_back(&s, std::move(c));
      }
    }
  }
  if (p.cases.empty())  // bad usage: nothing would run, and an empty results folder helps no one
    throw UsageError(expanded > 0 ? "--filter '" + opts.filter + "' matches none of the " + std::to_string(expanded) +
                                        " cases (see: dlbench list --suite ...)"
                                  : "nothing to run for --suite/--device as given (see: dlbench list)");
  return p;
}

std::map<std::string, json> records_by_case(const std::vector<json>& entries) {
  std::map<std::string, json> out;
  for (const auto& e : entries) {
    const std::string n = e.value("run_name", e.value("name", ""));
    if (!out.count(n) || e.value("aggregate_name", "") == "median") out[n] = e;
  }
  return out;
}

std::map<std::string, json> check_resume(const ResultsWriter& writer, const RunOptions& opts, const Plan& plan) {
  const json& h = writer.stored_header();
  check_same(h.value("options", json()), options_json(opts, plan.devices), "flags", writer.dir());
  if (h.value("planned", json()) != json(plan.names))
    throw UsageError("--resume " + writer.dir() + ": the planned cases differ from that run's (another dlbench version?)");
  // A record that is not one of the planned cases (another run's, copied in) would make a mixed
  // folder that says "complete": refused, not kept.
  const std::set<std::string> planned(plan.names.begin(), plan.names.end());
  std::size_t foreign = 0;
  std::string first;
  for (const auto& e : writer.entries()) {
    const json& n = e.contains("run_name") ? e["run_name"] : e.value("name", json());
    if (n.is_string() && planned.count(n.get<std::string>())) continue;
    if (foreign++ == 0) first = n.is_string() ? n.get<std::string>() : std::string("a record without a name");
  }
  if (foreign > 0)
    throw InputError(writer.dir() + "/results.jsonl: " + std::to_string(foreign) + " record(s) not in the run's plan (first: " +
                     first + "); cannot resume a folder that mixes runs");
  return records_by_case(writer.entries());
}

}  // namespace dlb::harness
