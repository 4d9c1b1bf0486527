// The suite registry, the declaration builder and the shared run flags (see suite.h).
#include "bench/suite.h"

#include <algorithm>
#include <memory>
#include <stdexcept>

namespace dlb::bench {

namespace {
std::vector<std::unique_ptr<Suite>>& registry() {
  static std::vector<std::unique_ptr<Suite>> r;
  return r;
}
}  // namespace

Suite& register_suite(const char* name) {
  for (const auto& s : registry())
    if (s->name == name) throw std::logic_error(std::string("suite '") + name + "' is declared twice");
  registry().push_back(std::make_unique<Suite>());
  registry().back()->name = name;
  return *registry().back();
}

const std::vector<const Suite*>& all_suites() {
  static std::vector<const Suite*> sorted;
  if (sorted.size() != registry().size()) {  // registration is over before main: built once
    sorted.clear();
    for (const auto& s : registry()) sorted.push_back(s.get());
    std::sort(sorted.begin(), sorted.end(), [](const Suite* a, const Suite* b) { return a->name < b->name; });
  }
  return sorted;
}

const Suite* find_suite(const std::string& name) {
  for (const Suite* s : all_suites())
    if (s->name == name) return s;
  return nullptr;
}

Suite& Suite::about(std::string text) {
  description = std::move(text);
  return *this;
}

Suite& Suite::axis(std::string axis_name, json values, json quick_values) {
  if (!values.is_array()) values = json::array({values});
  if (!quick_values.is_null() && !quick_values.is_array()) quick_values = json::array({quick_values});
  axes.push_back({std::move(axis_name), std::move(values), std::move(quick_values)});
  return *this;
}

Suite& Suite::takes(std::initializer_list<FlagSpec> specs) {
  flags.insert(flags.end(), specs.begin(), specs.end());
  return *this;
}

Suite& Suite::cases(std::function<std::vector<CaseSpec>(const SuiteOptions&)> f) {
  expand = std::move(f);
  return *this;
}

Suite& Suite::derived(std::function<void(std::vector<json>&)> f) {
  derive = std::move(f);
  return *this;
}

Suite& Suite::summary(std::function<void(const std::vector<json>&, std::ostream&)> f) {
  summarize = std::move(f);
  return *this;
}

Suite& Suite::no_blas_from_pool() {
  blas_from_pool = false;
  return *this;
}

Suite& Suite::across_ranks() {
  distributed = true;
  return *this;
}

const FlagSpec* Suite::flag_named(const std::string& flag_name) const {
  for (const auto& f : flags)
    if (f.name == flag_name) return &f;
  return nullptr;
}

SuiteOptions Suite::options(bool quick, const json& overrides) const {
  SuiteOptions o;
  o.suite = name;
  o.quick = quick;
  for (const auto& a : axes) o.axes[a.name] = quick && !a.quick.is_null() ? a.quick : a.values;
  for (const auto& [k, v] : overrides.items()) {
    o.axes[k] = v;
    o.given.push_back(k);
  }
  return o;
}

bool SuiteOptions::was_given(const std::string& axis) const {
  return std::find(given.begin(), given.end(), axis) != given.end();
}

namespace {
const json& axis_of(const SuiteOptions& o, const std::string& key) {
  if (!o.axes.contains(key) || !o.axes.at(key).is_array())
    throw std::logic_error("suite " + o.suite + " reads axis '" + key + "', which its options do not hold (declare it with .axis)");
  return o.axes.at(key);
}
}  // namespace

std::vector<long long> axis_ints(const SuiteOptions& o, const std::string& key) {
  std::vector<long long> out;
  for (const auto& v : axis_of(o, key)) out.push_back(v.get<long long>());
  return out;
}

std::vector<std::string> axis_strings(const SuiteOptions& o, const std::string& key) {
  std::vector<std::string> out;
  for (const auto& v : axis_of(o, key)) out.push_back(v.is_string() ? v.get<std::string>() : v.dump());
  return out;
}

bool summary_entry(const json& e) {
  return e.value("aggregate_name", "") == "median" || (e.value("run_type", "") == "iteration" && e.value("repetitions", 0) == 1);
}

namespace flag {
using P = FlagSpec::Parse;
const FlagSpec& sizes() {
  static const FlagSpec f{"--sizes", "Override the size axis, e.g. 512,2048 (transfer: 1MB,256KiB; dist: 8B..1GiB)", "size", true,
                          P::ints, 0, {}};
  return f;
}
namespace {
FlagSpec sizes_parsed_as(P parse) {
  FlagSpec f = sizes();
  f.parse = parse;
  return f;
}
}  // namespace
const FlagSpec& size_bytes() {
  static const FlagSpec f = sizes_parsed_as(P::bytes);
  return f;
}
const FlagSpec& size_sweep() {
  static const FlagSpec f = sizes_parsed_as(P::size_sweep);
  return f;
}
const FlagSpec& batch() {
  static const FlagSpec f{"--batch", "Override the batch axis, e.g. 64,4,2", "batch", true, P::ints, 1 << 20, {}};
  return f;
}
const FlagSpec& images() {
  static const FlagSpec f{"--images", "Training suites: images per timed epoch (default 50000, --quick 1024)", "images", true,
                          P::ints, 100000000, {}};
  return f;
}
const FlagSpec& dtype() {
  static const FlagSpec f{"--dtype", "Restrict dtypes: fp32,tf32,fp16,bf16", "dtype", true, P::dtypes, 0, {}};
  return f;
}
const FlagSpec& input() {
  static const FlagSpec f{"--input", "Training input pipeline: pageable | pinned | prefetch | resident | all", "input", true,
                          P::words, 0, {"pageable", "pinned", "prefetch", "resident", "all"}};
  return f;
}
const FlagSpec& cuda_graph() {
  static const FlagSpec f{"--cuda-graph",
                          "Replay GPU work from a CUDA graph: the training step (train, lecture, seq, gpt2), the forward (seq --op infer)",
                          "cuda_graph", false, P::on, 0, {}};
  return f;
}
const FlagSpec& peer() {
  static const FlagSpec f{"--peer", "Also run a peer implementation (pytorch) and print it beside ours", "peer", false, P::word,
                          0, {"pytorch"}};
  return f;
}
const FlagSpec& profile() {
  static const FlagSpec f{"--profile", "Training suites: after timing, one more step per case recorded per layer (traces/<case>.json)",
                          "profile", false, P::on, 0, {}};
  return f;
}
const FlagSpec& loader() {
  static const FlagSpec f{"--loader", "Training fed by the data loader, beside the resident rows: lecture (its preset) or "
                          "key=value,... (workers, mode, pin, prefetch, decode, augment, dataset, ...; docs/data.md)",
                          "loader", false, P::text, 0, {}};
  return f;
}
}  // namespace flag

}  // namespace dlb::bench
