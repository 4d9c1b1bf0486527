// The loader's shared pieces for the suites and `dlbench data load` (see loader_cases.h).
#include "bench/loader_cases.h"

#include "bench/peer.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>

#include "kernels/common/errors.h"
#include "models/loader/maker.h"

namespace dlb::bench {

namespace fs = std::filesystem;

namespace {
// DLBENCH_DATA_CACHE, else $XDG_CACHE_HOME/dlbench, else ~/.cache/dlbench, else TMPDIR: the synthetic
// sets are the same bytes every time (seed 0), so a run reuses what an earlier one wrote.
fs::path cache_root() {
  if (const char* e = std::getenv("DLBENCH_DATA_CACHE"); e && *e) return e;
  if (const char* e = std::getenv("XDG_CACHE_HOME"); e && *e) return fs::path(e) / "dlbench";
  if (const char* e = std::getenv("HOME"); e && *e) return fs::path(e) / ".cache" / "dlbench";
  return fs::temp_directory_path() / "dlbench-cache";
}
}  // namespace

ld::DiskFormat disk_format_for(ld::Decode d) {
  return d == ld::Decode::png ? ld::DiskFormat::png : d == ld::Decode::jpeg ? ld::DiskFormat::jpeg : ld::DiskFormat::python;
}

std::string synthetic_dataset(std::size_t images, ld::DiskFormat f) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const fs::path dir = cache_root() / ("cifar10-synthetic-" + std::to_string(images));
  const fs::path form = dir / ld::disk_format_folder(f);
  std::error_code ec;
  if (fs::is_directory(form, ec)) return dir.string();
  fs::create_directories(dir, ec);
  if (ec) throw InputError("cannot make the dataset cache " + dir.string() + ": " + ec.message());
  // Written beside, then renamed into place: a run interrupted half-way, or another run writing the
  // same set, never leaves a partial form where it is read.
  std::string tmpl = (dir / ".making-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw InputError("cannot make a temporary folder in " + dir.string());
  try {
    ld::make_cifar10(tmpl, f, images, images / 5, 0);
  } catch (...) {
    fs::remove_all(tmpl, ec);
    throw;
  }
  fs::rename(fs::path(tmpl) / ld::disk_format_folder(f), form, ec);  // fails only when another run won
  fs::remove_all(tmpl, ec);
  return dir.string();
}

ld::LoaderOptions with_dataset(ld::LoaderOptions o, std::size_t images) {
  if (o.dataset.empty()) o.dataset = synthetic_dataset(images, disk_format_for(o.decode));
  else o.limit = images;
  return o;
}

std::shared_ptr<const ld::Source> open_dataset(const ld::LoaderOptions& o) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<const ld::Source>> cache;
  const std::string key = o.dataset + "|" + ld::decode_name(o.decode) + "|" + o.split + "|" + std::to_string(o.limit);
  std::lock_guard<std::mutex> lock(mu);
  if (auto p = cache[key].lock()) return p;
  ld::SourceOptions so;
  so.decode = o.decode, so.split = o.split;
  std::shared_ptr<ld::Source> s = ld::open_source(o.dataset, so);
  if (o.limit && o.limit < s->size()) s->truncate(o.limit);
  cache[key] = s;
  return s;
}

double cpu_seconds_with_children() {
  rusage s{}, c{};
  getrusage(RUSAGE_SELF, &s);
  getrusage(RUSAGE_CHILDREN, &c);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return sec(s.ru_utime) + sec(s.ru_stime) + sec(c.ru_utime) + sec(c.ru_stime);
}

EpochCheck::EpochCheck(const ld::Source& src, const ld::LoaderOptions& o, Reference ref)
    : src_(src), o_(o), ref_(ref), seen_(src.size(), 0) {}

void EpochCheck::batch(const ld::Batch& b) {
  if (ref_ == every || (ref_ == first && batches_ == 0)) {
    ld::MakerConfig cfg;
    cfg.batch = static_cast<std::size_t>(o_.batch), cfg.shuffle = o_.shuffle, cfg.seed = o_.seed;
    cfg.transform.augment = o_.augment;
    std::vector<float> x;
    std::vector<std::int32_t> y;
    std::vector<std::uint32_t> idx;
    ld::reference_batch(src_, cfg, b.epoch, b.index, &x, &y, &idx);
    if (static_cast<std::size_t>(b.n) != idx.size() || std::memcmp(x.data(), b.x, x.size() * sizeof(float)) != 0 ||
        std::memcmp(y.data(), b.labels, y.size() * 4) != 0 || std::memcmp(idx.data(), b.indices, idx.size() * 4) != 0)
      throw std::runtime_error("loader verification failed: batch " + std::to_string(b.index) +
                               " differs from the reference transform (" + ld::describe_options(o_) + ")");
  }
  for (int k = 0; k < b.n; ++k) {
    const std::uint32_t i = b.indices[k];
    if (i >= seen_.size() || seen_[i]++)
      throw std::runtime_error("loader verification failed: sample " + std::to_string(i) + " twice in an epoch");
  }
  ++batches_;
  images_ += static_cast<std::size_t>(b.n);
}

std::size_t EpochCheck::finish() {
  const std::size_t n = src_.size(), b = static_cast<std::size_t>(o_.batch);
  const std::size_t want = o_.drop_last ? n / b * b : n;
  if (images_ != want)
    throw std::runtime_error("loader verification failed: an epoch gave " + std::to_string(images_) + " samples, not " +
                             std::to_string(want));
  return images_;
}

LoaderPeer::LoaderPeer(const ld::Source& src, const ld::LoaderOptions& o, std::string* why) {
  if (src.format() == ld::Format::cifar_binary) {
    *why = "torchvision reads no CIFAR-10 binary batches";
    return;
  }
  const PeerPython& pp = peer_python();  // the lecture peer's interpreter, chosen the same way
  if (pp.torch.empty()) {
    *why = pp.why;
    return;
  }
  const std::vector<std::string> args = {
      pp.python, peer_script("pytorch_loader.py"), "--format", src.format() == ld::Format::cifar_python ? "python" : "folder",
      "--path", src.path(), "--split", o.split, "--batch", std::to_string(o.batch), "--workers", std::to_string(o.workers),
      "--pin", o.pin ? "on" : "off", "--prefetch", std::to_string(o.prefetch), "--augment", ld::augment_name(o.augment),
      "--seed", std::to_string(o.seed), "--limit", std::to_string(o.limit)};
  try {
    child_ = std::make_unique<LineChild>(args);
    const nlohmann::json ready = record();
    if (!ready.value("ready", false)) throw std::runtime_error(ready.dump());
    version_ = ready.value("torch", "") + " / torchvision " + ready.value("torchvision", "");
  } catch (const std::exception& e) {
    *why = std::string("the PyTorch peer did not start (") + e.what() +
           "; DLBENCH_PEER_PYTHON names a python with torch and torchvision)";
    child_.reset();
  }
}

LoaderRound LoaderPeer::epoch() {
  if (!child_->send("epoch")) throw std::runtime_error("the PyTorch peer stopped reading");
  const nlohmann::json j = record();
  LoaderRound r;
  r.images = j.value("images", std::size_t(0));
  r.seconds = j.value("seconds", 0.0);
  r.first_batch_s = j.value("first_batch_s", 0.0);
  r.cpu_s = j.value("cpu_s", 0.0);
  return r;
}

nlohmann::json LoaderPeer::record() {
  std::string line, all;
  while (child_->read_line(&line)) {
    if (interrupt_requested()) throw Interrupted("peer interrupted");
    if (!line.empty() && line[0] == '{') {
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_discarded()) return j;
    }
    all += line + " ";
  }
  if (interrupt_requested()) throw Interrupted("peer interrupted");
  throw std::runtime_error("the PyTorch peer ended: " + all.substr(0, 300));
}

}  // namespace dlb::bench
