// The data loader: PyTorch's DataLoader for the seeds' CIFAR-10 pipeline, in C++. A dataset on disk
// (source.h) read by N workers (threads or forked processes, workers.h), each making whole batches in
// shared slots (slots.h): the epoch's seeded order (sampler.h), each sample read, decoded and
// transformed in place (transform.h); handed out in order, with up to `prefetch` batches per worker in
// flight; with pin=on copied by a pin thread into host buffers that are page-locked where a GPU is
// (pinned.h). Construct from options, call next() for each batch, read stats(); device_feed.h takes
// the batches on to a GPU.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "models/loader/maker.h"
#include "models/loader/pinned.h"
#include "models/loader/source.h"
#include "models/loader/workers.h"

namespace dlb::models::loader {

struct LoaderOptions {
  std::string dataset;            // a folder (source.h: open_source)
  std::string split = "train";    // train | test
  int batch = 64;
  int workers = 0;                // 0: batches made in the caller's thread, as num_workers=0
  WorkerMode mode = WorkerMode::thread;
  bool pin = false;               // a pin step into page-locked buffers (pin_memory=True)
  int prefetch = 2;               // batches in flight per worker (prefetch_factor)
  Decode decode = Decode::auto_;  // which form of the dataset (none: batches; png / jpeg: images)
  Augment augment = Augment::none;
  bool shuffle = true, drop_last = false;
  std::uint64_t seed = 0;
  std::size_t limit = 0;          // only the first N samples (0: all)
};

// "key=value,key=value" over `base`: preset (lecture: 2 process workers, CIFAR-10's python batches
// (decode none), ToTensor + Normalize, shuffled, batch 64), dataset, split, batch, workers, mode,
// pin (on/off), prefetch, decode, augment, shuffle (on/off), drop_last (on/off), seed, limit.
// UsageError naming the key on anything else. A preset is applied first wherever it stands.
LoaderOptions parse_loader_options(const std::string& spec, LoaderOptions base = {});
LoaderOptions loader_preset(const std::string& name);
std::string describe_options(const LoaderOptions& o);  // the spec back, every key, one line

struct Batch {
  std::int64_t epoch = 0, index = 0;
  int n = 0, c = 0, h = 0, w = 0;
  const float* x = nullptr;                // n x c x h x w floats
  const std::int32_t* labels = nullptr;
  const std::uint32_t* indices = nullptr;  // each sample's index in the dataset
  bool pinned = false;                     // x and labels are page-locked
};

struct LoaderStats {
  std::size_t batches = 0, images = 0;
  double first_batch_s = -1;  // construction (workers started) to the first batch handed out
  double wait_s = 0;          // time the caller spent blocked in next()
  StageTimes stages;          // read, decode, transform, collate (workers), pin (the pin step)
  double worker_cpu_s = 0;    // CPU time the workers spent making batches
};

class Loader;

// One batch on loan from the loader: its memory stays valid while the lease lives; dropping it
// gives the slot back. Up to 2 leases may be held at once (a device feed's double buffer).
class BatchLease {
 public:
  BatchLease() = default;
  ~BatchLease() { reset(); }
  BatchLease(BatchLease&& o) noexcept;
  BatchLease& operator=(BatchLease&& o) noexcept;
  BatchLease(const BatchLease&) = delete;
  BatchLease& operator=(const BatchLease&) = delete;
  explicit operator bool() const { return owner_ != nullptr; }
  const Batch& operator*() const { return b_; }
  const Batch* operator->() const { return &b_; }
  void reset();

 private:
  friend class Loader;
  Loader* owner_ = nullptr;
  Batch b_;
  int slot_ = -1;
  bool pinned_slot_ = false;
};

class Loader {
 public:
  explicit Loader(const LoaderOptions& o);  // opens o.dataset
  Loader(std::shared_ptr<const Source> src, const LoaderOptions& o);
  ~Loader();  // stops the workers; every lease must be dropped first
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The epoch's next batch, in order; an empty lease at the end of the epoch, after which the next
  // call begins the next epoch (its own order). A worker's bad file throws InputError; a worker that
  // throws or dies std::runtime_error with its message; a signal (interrupt_requested) Interrupted.
  BatchLease next();
  std::size_t batches_per_epoch() const { return nb_; }
  const Source& source() const { return *src_; }
  const LoaderOptions& options() const { return o_; }
  LoaderStats stats() const;
  std::string describe() const;  // what runs: workers, pin memory kind, dataset
  std::vector<int> worker_pids() const;

 private:
  friend class BatchLease;
  struct PinnedBatch {
    HostBuffer mem;
    float* x = nullptr;
    std::int32_t* labels = nullptr;
    std::uint32_t* indices = nullptr;
    BatchHeader header;
  };
  void start();
  void halt();  // stops the pin thread, then the workers
  void release(int slot, bool pinned);
  void dispatch();                        // caller holds m_
  void take_done(const Done& d);          // caller holds m_
  [[noreturn]] void fail(const Done& d);  // caller does not hold m_
  int pin(int slot);                      // copies a slot into a free pinned buffer; its index
  void pin_loop();
  BatchLease lease(int slot, bool pinned);

  LoaderOptions o_;
  std::shared_ptr<const Source> src_;
  MakerConfig cfg_;
  Fault fault_;
  std::size_t nb_ = 0, item_ = 0;
  std::unique_ptr<SlotArena> slots_;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<BatchMaker> inline_maker_;  // workers = 0
  std::vector<PinnedBatch> pinned_;
  std::thread pin_thread_;

  mutable std::mutex m_;
  std::condition_variable cv_;
  std::deque<int> free_slots_, free_pinned_;
  std::map<std::int64_t, int> ready_;  // batch -> slot (or pinned buffer with pin on)
  std::int64_t epoch_ = 0, sent_ = 0, rcvd_ = 0;
  int outstanding_ = 0;
  bool stop_ = false;
  Done error_;  // status != ok once a worker failed
  LoaderStats stats_;
  double t_start_ = 0;
};

}  // namespace dlb::models::loader
