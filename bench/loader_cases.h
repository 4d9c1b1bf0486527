// What the loader suite, the loader-fed training cases and `dlbench data load` share: a synthetic
// dataset on disk for runs not given one, opened datasets shared by the cases of a run, an epoch's
// checks against the reference transform, CPU time with reaped children, and the PyTorch DataLoader
// peer (bench/peers/pytorch_loader.py) as a child serving one epoch per request.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "kernels/common/child.h"
#include "models/loader/loader.h"
#include "models/loader/make.h"

namespace dlb::bench {

namespace ld = models::loader;

// A folder holding `data make`'s seeded synthetic CIFAR-10 (seed 0) with `images` training images in
// form `f` (python batches, PNG or JPEG folders), written once per process under TMPDIR (forms added
// as asked) and removed at exit.
std::string synthetic_dataset(std::size_t images, ld::DiskFormat f);
// The form `data make` keeps for a decode (none: python batches).
ld::DiskFormat disk_format_for(ld::Decode d);

// `o` with its dataset for an epoch of `images`: o.dataset empty -> the synthetic set of `images` in
// the form o.decode reads; a dataset given -> its first `images` samples (limit).
ld::LoaderOptions with_dataset(ld::LoaderOptions o, std::size_t images);

// The dataset of `o` (dataset, decode, split, limit), opened once per run and shared.
std::shared_ptr<const ld::Source> open_dataset(const ld::LoaderOptions& o);

// This process's CPU seconds plus its reaped children's (process workers are reaped when a loader
// stops), as the peer measures its own.
double cpu_seconds_with_children();

// An epoch checked as it goes: each sample exactly once, and the batches (none, the first, or every
// one) bit for bit the reference transform of their indices. Throws std::runtime_error ("loader
// verification failed: ...").
class EpochCheck {
 public:
  enum Reference { none, first, every };
  EpochCheck(const ld::Source& src, const ld::LoaderOptions& o, Reference ref);
  void batch(const ld::Batch& b);
  std::size_t finish();  // the epoch's images

 private:
  const ld::Source& src_;
  ld::LoaderOptions o_;
  Reference ref_;
  std::size_t batches_ = 0, images_ = 0;
  std::vector<unsigned char> seen_;
};

// One lifetime of a loader or of the peer's iterator: images, wall seconds, time to the first batch,
// CPU seconds (with children).
struct LoaderRound {
  std::size_t images = 0;
  double seconds = 0, first_batch_s = 0, cpu_s = 0;
  ld::LoaderStats stats;
};

// The PyTorch peer of loader options `o` over `src`'s files: torchvision's CIFAR10 (python batches)
// or ImageFolder, DataLoader(batch, shuffle, num_workers, pin_memory, prefetch_factor). Its python is
// DLBENCH_PEER_PYTHON, else python3. Empty (and *why says why) where it cannot run.
class LoaderPeer {
 public:
  LoaderPeer(const ld::Source& src, const ld::LoaderOptions& o, std::string* why);
  explicit operator bool() const { return child_ != nullptr; }
  const std::string& version() const { return version_; }
  LoaderRound epoch();  // one epoch through a new iterator (new worker processes)

 private:
  nlohmann::json record();
  std::unique_ptr<LineChild> child_;
  std::string version_;
};

}  // namespace dlb::bench
