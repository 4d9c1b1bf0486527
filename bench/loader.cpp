// Suite "loader": the data loader alone (models/loader/), no training: images/s of one epoch against
// workers (0..cores), mode (thread/process), decode (none/png/jpeg), pin (off/on), augment, prefetch;
// with the time to the first batch, CPU time per image and where the worker time goes (read, decode,
// transform, collate, pin). A timed iteration is one fresh loader: workers started, one epoch, workers
// stopped (as PyTorch's iterator with persistent_workers=False). Before timing every batch of one
// epoch is compared bit for bit with the reference transform. --peer pytorch: torchvision's datasets
// and DataLoader over the same files (bench/peers/pytorch_loader.py) as rows beside ours.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <ostream>
#include <thread>

#include "bench/loader_cases.h"
#include "bench/markdown.h"
#include "bench/suite.h"

namespace dlb::bench {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

class LoaderCase final : public Case {
 public:
  LoaderCase(ld::LoaderOptions o, std::size_t images) : o_(std::move(o)), images_(images) {}
  void setup() override {
    o_ = with_dataset(o_, images_);
    src_ = open_dataset(o_);
  }
  CheckResult verify() override {
    std::string why;
    try {
      ld::Loader loader(src_, o_);
      EpochCheck check(*src_, o_, EpochCheck::every);
      while (ld::BatchLease b = loader.next()) check.batch(*b);
      epoch_images_ = check.finish();
      describe_ = loader.describe();
    } catch (const std::runtime_error& e) {
      if (dynamic_cast<const InputError*>(&e) || dynamic_cast<const Interrupted*>(&e)) throw;
      why = e.what();
    }
    return judge(why.empty() ? 0.0 : 1.0, 0.5, why);
  }
  double run() override {
    const double c0 = cpu_seconds_with_children();
    const auto t0 = std::chrono::steady_clock::now();
    std::size_t images = 0;
    ld::LoaderStats st;
    {
      ld::Loader loader(src_, o_);
      EpochCheck check(*src_, o_, EpochCheck::none);  // each sample once: cheap, and always true
      while (ld::BatchLease b = loader.next()) check.batch(*b);
      images = check.finish();
      st = loader.stats();
    }  // workers stopped and reaped: their CPU time is in the children's
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    cpu_s_ += cpu_seconds_with_children() - c0;
    images_done_ += images;
    stages_ += st.stages;
    first_.push_back(st.first_batch_s);
    return s;
  }
  long iterations() const override { return 1; }
  Work work() const override { return {0, 0, double(epoch_images_)}; }
  Metric metric() const override { return Metric::imgs_per_s; }
  void annotate(json& r) const override {
    const double per = images_done_ ? 1e6 / double(images_done_) : 0;
    r["first_batch_ms"] = 1e3 * median(first_);
    r["cpu_us_per_img"] = cpu_s_ * per;
    r["stage_us_per_img"] = {{"read", stages_.read * per}, {"decode", stages_.decode * per}, {"transform", stages_.transform * per},
                             {"collate", stages_.collate * per}, {"pin", stages_.pin * per}};
    r["loader"] = ld::describe_options(o_);
    r["loader_runs"] = describe_;
    r["dataset"] = src_->path();
  }

 private:
  ld::LoaderOptions o_;
  std::string describe_;
  std::size_t images_, epoch_images_ = 0, images_done_ = 0;
  std::shared_ptr<const ld::Source> src_;
  double cpu_s_ = 0;
  ld::StageTimes stages_;
  std::vector<double> first_;
};

// PyTorch's DataLoader over the same files: one epoch per repetition through a new iterator, its own
// time (manual time), timed in the same interleaved rounds as ours.
class PeerLoaderCase final : public Case {
 public:
  PeerLoaderCase(ld::LoaderOptions o, std::size_t images, int reps) : o_(std::move(o)), images_(images), reps_(reps) {}
  void setup() override {
    o_ = with_dataset(o_, images_);
    src_ = open_dataset(o_);
    std::string why;
    peer_ = std::make_unique<LoaderPeer>(*src_, o_, &why);
    if (!*peer_) throw Unsupported("pytorch peer unavailable: " + why);
  }
  CheckResult verify() override {
    const LoaderRound r = peer_->epoch();
    cpu_s_ += r.cpu_s;
    const std::size_t want = o_.drop_last ? src_->size() / o_.batch * o_.batch : src_->size();
    return judge(r.images == want ? 0.0 : 1.0, 0.5, "the peer's epoch gave " + std::to_string(r.images) + " images, not " + std::to_string(want));
  }
  double run() override {
    const LoaderRound r = peer_->epoch();
    cpu_s_ += r.cpu_s, timed_cpu_s_ += r.cpu_s, images_done_ += r.images;
    first_.push_back(r.first_batch_s);
    epoch_images_ = r.images;
    return r.seconds;
  }
  void teardown() override { peer_.reset(); }
  double child_cpu_seconds() const override { return cpu_s_; }
  bool manual_time() const override { return true; }
  bool fixed_repetitions() const override { return true; }
  int repetitions() const override { return reps_; }
  long iterations() const override { return 1; }
  Work work() const override { return {0, 0, double(epoch_images_ ? epoch_images_ : src_->size())}; }
  Metric metric() const override { return Metric::imgs_per_s; }
  void annotate(json& r) const override {
    r["peer"] = "pytorch";
    r["torch_version"] = peer_ ? peer_->version() : "?";
    r["first_batch_ms"] = 1e3 * median(first_);
    r["cpu_us_per_img"] = images_done_ ? 1e6 * timed_cpu_s_ / double(images_done_) : 0;
    r["dataset"] = src_->path();
  }

 private:
  ld::LoaderOptions o_;
  std::size_t images_;
  int reps_;
  std::shared_ptr<const ld::Source> src_;
  std::unique_ptr<LoaderPeer> peer_;
  double cpu_s_ = 0, timed_cpu_s_ = 0;
  std::size_t images_done_ = 0, epoch_images_ = 0;
  std::vector<double> first_;
};

bool on_off(const std::string& v, const char* axis) {
  if (v == "on") return true;
  if (v == "off") return false;
  throw UsageError(std::string("--") + axis + " '" + v + "': expected on or off");
}

std::vector<CaseSpec> expand(const SuiteOptions& o) {
  std::vector<CaseSpec> cases;
  if (std::find(o.devices.begin(), o.devices.end(), "cpu") == o.devices.end()) return cases;  // a host-side suite
  const bool with_peer = o.extra.value("peer", "") == "pytorch";
  const std::string dataset = o.extra.value("dataset", "");
  const long long cores = std::max(1u, std::thread::hardware_concurrency());
  std::vector<long long> workers;
  for (long long w : axis_ints(o, "workers"))  // the default list stops at the cores; a list given is run as given
    if (o.was_given("workers") || w <= cores) workers.push_back(w);
  const auto modes = axis_strings(o, "mode");
  for (const auto& m : modes) ld::parse_worker_mode(m);
  const int peer_reps = o.repetitions > 0 ? o.repetitions : o.quick ? 2 : 5;
  for (long long images : axis_ints(o, "images"))
    for (long long batch : axis_ints(o, "batch"))
      for (const auto& decode : axis_strings(o, "decode"))
        for (const auto& augment : axis_strings(o, "augment"))
          for (const auto& pin : axis_strings(o, "pin"))
            for (long long prefetch : axis_ints(o, "prefetch"))
              for (const auto& mode : modes)
                for (long long w : workers) {
                  if (w == 0 && mode != modes.front()) continue;  // no workers: no mode
                  ld::LoaderOptions lo;
                  lo.batch = int(batch), lo.workers = int(w), lo.mode = ld::parse_worker_mode(mode);
                  lo.decode = ld::parse_decode(decode), lo.augment = ld::parse_augment(augment);
                  lo.pin = on_off(pin, "pin"), lo.prefetch = int(prefetch), lo.dataset = dataset;
                  for (const bool peer : {false, true}) {
                    if (peer && !with_peer) continue;
                    CaseId id{"loader", "load", "cpu", "fp32", {}};
                    id.with("decode", decode).with("mode", w == 0 ? "inline" : mode).with("workers", w).with("pin", pin);
                    id.with("augment", augment).with("prefetch", prefetch).with("batch", batch).with("images", images);
                    id.with("impl", peer ? "pytorch" : "ours");
                    const auto n = std::size_t(images);
                    if (peer)
                      cases.push_back({id, [=] { return std::make_unique<PeerLoaderCase>(lo, n, peer_reps); }});
                    else
                      cases.push_back({id, [=] { return std::make_unique<LoaderCase>(lo, n); }});
                  }
                }
  return cases;
}

std::string fmt(const char* f, double v) {
  char b[48];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// One row per configuration: ours, PyTorch's beside it, the ratio; then our stages.
void summarize(const std::vector<json>& records, std::ostream& out) {
  using Key = std::vector<std::string>;
  std::map<Key, const json*> ours, theirs;
  std::vector<Key> order;
  for (const auto& r : records) {
    if (!r.contains("imgs_per_s")) continue;
    Key k;
    for (const char* a : {"decode", "augment", "pin", "mode", "workers", "prefetch", "batch"})
      k.push_back(r.contains(a) ? (r.at(a).is_string() ? r.at(a).get<std::string>() : r.at(a).dump()) : "-");
    auto& dst = r.value("impl", "ours") == "pytorch" ? theirs : ours;
    if (!ours.count(k) && !theirs.count(k)) order.push_back(k);
    dst[k] = &r;
  }
  out << "\n### The loader alone: one epoch per repetition, a fresh loader each (medians)\n\n";
  if (order.empty()) {
    out << "(no loader case finished)\n";
    return;
  }
  std::vector<std::vector<std::string>> rows = {{"decode", "augment", "pin", "mode", "workers", "imgs/s", "PyTorch imgs/s",
                                                 "ours / PyTorch", "first batch ms", "PyTorch first ms", "CPU us/img",
                                                 "PyTorch CPU us/img", "read", "decode us", "transform", "collate", "pin us"}};
  for (const auto& k : order) {
    const json* a = ours.count(k) ? ours[k] : nullptr;
    const json* p = theirs.count(k) ? theirs[k] : nullptr;
    auto num = [](const json* r, const char* key, const char* f) { return r && r->contains(key) ? fmt(f, r->at(key).get<double>()) : "-"; };
    auto stage = [&](const char* s) {
      return a && a->contains("stage_us_per_img") ? fmt("%.2f", a->at("stage_us_per_img").value(s, 0.0)) : "-";
    };
    const std::string ratio = a && p ? fmt("%.2fx", a->at("imgs_per_s").get<double>() / p->at("imgs_per_s").get<double>()) : "-";
    rows.push_back({k[0], k[1], k[2], k[3], k[4], num(a, "imgs_per_s", "%.0f"), num(p, "imgs_per_s", "%.0f"), ratio,
                    num(a, "first_batch_ms", "%.1f"), num(p, "first_batch_ms", "%.1f"), num(a, "cpu_us_per_img", "%.1f"),
                    num(p, "cpu_us_per_img", "%.1f"), stage("read"), stage("decode"), stage("transform"), stage("collate"),
                    stage("pin")});
  }
  print_markdown(out, rows, true);
  out << "\nStage columns: microseconds per image of wall time inside the workers, summed over them (on a loaded machine "
         "they include waits for a core).\n";
}

const FlagSpec& workers_flag() {
  static const FlagSpec f{"--workers", "Loader suite: worker counts (0: in the caller's thread); default 0..cores", "workers",
                          true, FlagSpec::Parse::counts, 256, {}};
  return f;
}
const FlagSpec& mode_flag() {
  static const FlagSpec f{"--mode", "Loader suite: thread | process (a list)", "mode", true, FlagSpec::Parse::words, 0, {"thread", "process"}};
  return f;
}
const FlagSpec& decode_flag() {
  static const FlagSpec f{"--decode", "Loader suite: none (raw batches) | png | jpeg (a list)", "decode", true,
                          FlagSpec::Parse::words, 0, {"none", "png", "jpeg"}};
  return f;
}
const FlagSpec& pin_flag() {
  static const FlagSpec f{"--pin", "Loader suite: the pin step, off | on (a list)", "pin", true, FlagSpec::Parse::words, 0, {"off", "on"}};
  return f;
}
const FlagSpec& augment_flag() {
  static const FlagSpec f{"--augment", "Loader suite: none | crop-flip (a list)", "augment", true, FlagSpec::Parse::words, 0,
                          {"none", "crop-flip"}};
  return f;
}
const FlagSpec& prefetch_flag() {
  static const FlagSpec f{"--prefetch", "Loader suite: batches in flight per worker (a list)", "prefetch", true,
                          FlagSpec::Parse::ints, 64, {}};
  return f;
}
const FlagSpec& dataset_flag() {
  static const FlagSpec f{"--dataset", "a dataset folder (docs/data.md; default: a synthetic CIFAR-10 of "
                          "--images images, made once into the data cache)", "dataset", false, FlagSpec::Parse::text, 0, {}};
  return f;
}

}  // namespace

DLB_SUITE(loader)
    .about("The data loader alone: images/s of an epoch against workers 0..cores, mode, decode, pin, augment, prefetch; "
           "first batch, CPU per image, stages; --peer pytorch: PyTorch's DataLoader over the same files")
    .axis("workers", {0, 1, 2, 4, 8, 16, 32, 64}, {0, 2})
    .axis("mode", {"thread", "process"}, {"process"})
    .axis("decode", {"none", "png", "jpeg"}, {"none", "png"})
    .axis("pin", {"off", "on"}, {"off"})
    .axis("augment", {"none"})
    .axis("prefetch", {2})
    .axis("batch", {64})
    .axis("images", {10000}, {512})
    .takes({workers_flag(), mode_flag(), decode_flag(), pin_flag(), augment_flag(), prefetch_flag(), dataset_flag(),
            flag::batch(), flag::images(), flag::peer()})
    .no_blas_from_pool()
    .cases(expand)
    .summary(summarize);

}  // namespace dlb::bench
