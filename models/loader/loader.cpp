// The loader's hand-out order, slots, pin step and errors (see loader.h). Batch b of an epoch goes
// to worker b % workers (PyTorch's round-robin), at most workers x prefetch tasks in flight; results
// arrive in any order and are handed out in batch order. With pin on, the pin thread is the one that
// waits on the workers: each finished batch is copied into a free pinned buffer and its slot freed.
#include "models/loader/loader.h"

#include <chrono>
#include <cstring>
#include <utility>

#include "kernels/common/child.h"
#include "kernels/common/errors.h"
#include "models/loader/sampler.h"

namespace dlb::models::loader {

namespace {

using Clock = std::chrono::steady_clock;
double now_s() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

constexpr int kLeases = 2;     // batches a caller may hold at once
constexpr int kPollMs = 100;   // how often a wait looks for an interrupt
constexpr int kPinPollMs = 10; // how soon the pin thread sees the loader stop (a stop waits for it)

}  // namespace

// ---- leases ----

BatchLease::BatchLease(BatchLease&& o) noexcept { *this = std::move(o); }

BatchLease& BatchLease::operator=(BatchLease&& o) noexcept {
  if (this != &o) {
    reset();
    owner_ = std::exchange(o.owner_, nullptr);
    b_ = o.b_;
    slot_ = o.slot_;
    pinned_slot_ = o.pinned_slot_;
  }
  return *this;
}

void BatchLease::reset() {
  if (owner_) owner_->release(slot_, pinned_slot_);
  owner_ = nullptr;
}

// ---- the loader ----

Loader::Loader(const LoaderOptions& o) : o_(o) {
  t_start_ = now_s();
  if (o_.dataset.empty()) throw UsageError("loader: no dataset given (dataset=FOLDER)");
  SourceOptions so;
  so.decode = o_.decode;
  so.split = o_.split;
  auto src = open_source(o_.dataset, so);
  if (o_.limit) src->truncate(o_.limit);
  src_ = std::move(src);
  start();
}

Loader::Loader(std::shared_ptr<const Source> src, const LoaderOptions& o) : o_(o), src_(std::move(src)) {
  t_start_ = now_s();
  start();
}

void Loader::start() {
  if (o_.batch < 1) throw UsageError("loader: batch " + std::to_string(o_.batch) + " (at least 1)");
  if (o_.workers < 0 || o_.workers > 256) throw UsageError("loader: workers " + std::to_string(o_.workers) + " (0 to 256)");
  if (o_.prefetch < 1 || o_.prefetch > 64) throw UsageError("loader: prefetch " + std::to_string(o_.prefetch) + " (1 to 64)");
  if (src_->size() == 0) throw InputError("dataset " + src_->path() + ": no samples");
  nb_ = batch_count(src_->size(), static_cast<std::size_t>(o_.batch), o_.drop_last);
  if (nb_ == 0)
    throw UsageError("loader: batch " + std::to_string(o_.batch) + " with drop_last leaves no batch of the " +
                     std::to_string(src_->size()) + " samples");
  fault_ = Fault::from_env();
  cfg_.batch = static_cast<std::size_t>(o_.batch);
  cfg_.shuffle = o_.shuffle;
  cfg_.seed = o_.seed;
  cfg_.transform.augment = o_.augment;
  item_ = std::size_t(src_->channels()) * src_->height() * src_->width();
  const int in_flight = o_.workers * o_.prefetch;
  const int slot_count = (o_.workers ? in_flight : 1) + kLeases;
  slots_ = std::make_unique<SlotArena>(slot_count, cfg_.batch, item_);
  for (int k = 0; k < slot_count; ++k) free_slots_.push_back(k);
  // Workers before any pinned memory or thread of ours: a fork then copies nothing of CUDA's.
  if (o_.workers == 0) inline_maker_ = std::make_unique<BatchMaker>(*src_, cfg_);
  else if (o_.mode == WorkerMode::thread) pool_ = start_thread_workers(o_.workers, *src_, cfg_, *slots_, fault_);
  else pool_ = start_process_workers(o_.workers, *src_, cfg_, *slots_, fault_);
  if (o_.pin) {
    const std::size_t bytes = cfg_.batch * (item_ * sizeof(float) + 2 * sizeof(std::int32_t)) + 128;
    const int count = (o_.workers ? in_flight : 1) + kLeases;
    for (int k = 0; k < count; ++k) {
      PinnedBatch p;
      p.mem = HostBuffer(bytes, true);
      auto* base = static_cast<unsigned char*>(p.mem.data());
      p.x = reinterpret_cast<float*>(base);
      p.labels = reinterpret_cast<std::int32_t*>(base + (cfg_.batch * item_ * sizeof(float) + 63) / 64 * 64);
      p.indices = reinterpret_cast<std::uint32_t*>(p.labels + cfg_.batch);
      pinned_.push_back(std::move(p));
      free_pinned_.push_back(k);
    }
    if (pool_) pin_thread_ = std::thread([this] { pin_loop(); });
  }
}

Loader::~Loader() { halt(); }

void Loader::halt() {
  {
    std::lock_guard<std::mutex> g(m_);
    stop_ = true;
  }
  cv_.notify_all();
  if (pin_thread_.joinable()) pin_thread_.join();  // first: it may be waiting on the workers
  if (pool_) pool_->stop();
}

std::vector<int> Loader::worker_pids() const { return pool_ ? pool_->pids() : std::vector<int>{}; }

LoaderStats Loader::stats() const {
  std::lock_guard<std::mutex> g(m_);
  return stats_;
}

std::string Loader::describe() const {
  std::string s = o_.workers == 0 ? std::string("no workers (batches made in the caller's thread)")
                                  : std::to_string(o_.workers) + " " + worker_mode_name(o_.mode) + " worker" +
                                        (o_.workers > 1 ? "s" : "") + ", prefetch " + std::to_string(o_.prefetch);
  s += ", pin " + (o_.pin ? "on: " + pinned_memory_kind() : std::string("off"));
  s += "; " + std::string(format_name(src_->format())) + " " + src_->path() + " (" + std::to_string(src_->size()) +
       " samples of " + std::to_string(src_->channels()) + "x" + std::to_string(src_->height()) + "x" +
       std::to_string(src_->width()) + ", decode " + src_->decode() + ")";
  s += ", augment " + std::string(augment_name(o_.augment)) + ", batch " + std::to_string(o_.batch) +
       (o_.shuffle ? ", shuffled (seed " + std::to_string(o_.seed) + ")" : ", in order");
  return s;
}

void Loader::release(int slot, bool pinned) {
  {
    std::lock_guard<std::mutex> g(m_);
    (pinned ? free_pinned_ : free_slots_).push_back(slot);
  }
  cv_.notify_all();
}

void Loader::dispatch() {
  while (sent_ < static_cast<std::int64_t>(nb_) && outstanding_ < o_.workers * o_.prefetch && !free_slots_.empty()) {
    Task t;
    t.epoch = epoch_, t.batch = sent_, t.slot = free_slots_.front();
    free_slots_.pop_front();
    pool_->submit(static_cast<int>(sent_ % o_.workers), t);
    ++sent_, ++outstanding_;
  }
}

void Loader::take_done(const Done& d) {
  const BatchHeader& h = *slots_->slot(d.slot).header;
  stats_.stages += h.times;
  stats_.worker_cpu_s += h.cpu_s;
  --outstanding_;
}

void Loader::fail(const Done& d) {
  halt();  // nothing keeps running behind the error
  if (d.status == Done::bad_input) throw InputError(d.message);
  if (d.status == Done::died) throw std::runtime_error(d.message);
  throw std::runtime_error("loader worker " + std::to_string(d.worker) + ": " + d.message);
}

int Loader::pin(int slot) {
  int k = -1;
  {
    std::unique_lock<std::mutex> g(m_);
    cv_.wait(g, [&] { return stop_ || !free_pinned_.empty(); });
    if (stop_) return -1;
    k = free_pinned_.front();
    free_pinned_.pop_front();
  }
  const auto t0 = Clock::now();
  const SlotView v = slots_->slot(slot);
  PinnedBatch& p = pinned_[static_cast<std::size_t>(k)];
  const std::size_t n = static_cast<std::size_t>(v.header->n);
  std::memcpy(p.x, v.x, n * item_ * sizeof(float));
  std::memcpy(p.labels, v.labels, n * sizeof(std::int32_t));
  std::memcpy(p.indices, v.indices, n * sizeof(std::uint32_t));
  p.header = *v.header;
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::lock_guard<std::mutex> g(m_);
  stats_.stages.pin += s;
  return k;
}

void Loader::pin_loop() {
  for (;;) {
    {
      std::lock_guard<std::mutex> g(m_);
      if (stop_ || error_.status != Done::ok) return;
    }
    Done d;
    if (!pool_->wait(&d, kPinPollMs)) continue;
    if (d.status != Done::ok) {
      {
        std::lock_guard<std::mutex> g(m_);
        error_ = d;
      }
      cv_.notify_all();
      return;
    }
    const int k = pin(d.slot);
    if (k < 0) return;
    {
      std::lock_guard<std::mutex> g(m_);
      take_done(d);
      free_slots_.push_back(d.slot);
      ready_[d.batch] = k;
    }
    cv_.notify_all();
  }
}

BatchLease Loader::lease(int slot, bool pinned) {
  BatchLease l;
  l.owner_ = this;
  l.slot_ = slot;
  l.pinned_slot_ = pinned;
  Batch& b = l.b_;
  const BatchHeader* h = nullptr;
  if (pinned) {
    const PinnedBatch& p = pinned_[static_cast<std::size_t>(slot)];
    h = &p.header;
    b.x = p.x, b.labels = p.labels, b.indices = p.indices, b.pinned = p.mem.pinned();
  } else {
    const SlotView v = slots_->slot(slot);
    h = v.header;
    b.x = v.x, b.labels = v.labels, b.indices = v.indices;
  }
  b.epoch = h->epoch, b.index = h->index, b.n = h->n;
  b.c = src_->channels(), b.h = src_->height(), b.w = src_->width();
  std::lock_guard<std::mutex> g(m_);
  stats_.batches += 1;
  stats_.images += static_cast<std::size_t>(b.n);
  if (stats_.first_batch_s < 0) stats_.first_batch_s = now_s() - t_start_;
  return l;
}

BatchLease Loader::next() {
  std::unique_lock<std::mutex> g(m_);
  if (error_.status != Done::ok) {
    const Done d = error_;
    g.unlock();
    fail(d);
  }
  if (stop_) throw std::logic_error("loader: next() after the loader stopped");
  if (rcvd_ == static_cast<std::int64_t>(nb_)) {  // the epoch is over; the next call begins the next
    ++epoch_;
    sent_ = rcvd_ = 0;
    return BatchLease{};
  }
  if (interrupt_requested()) {
    g.unlock();
    halt();
    throw Interrupted("loader interrupted");
  }
  const bool starved = pool_ ? free_slots_.empty() && outstanding_ == 0 && ready_.empty()
                             : free_slots_.empty() || (o_.pin && free_pinned_.empty());
  if (starved) throw std::logic_error("loader: more than " + std::to_string(kLeases) + " batches held at once");
  const double t0 = now_s();
  if (!pool_) {  // num_workers = 0: made here, now
    const int slot = free_slots_.front();
    free_slots_.pop_front();
    g.unlock();
    Done d;
    run_task(*inline_maker_, *slots_, Task{epoch_, rcvd_, slot, 0}, 0, fault_, false, &d);
    g.lock();
    stats_.wait_s += now_s() - t0;
    if (d.status != Done::ok) {
      free_slots_.push_back(slot);
      error_ = d;
      g.unlock();
      fail(d);
    }
    ++outstanding_;
    take_done(d);
    ++rcvd_;
    if (!o_.pin) {
      g.unlock();
      return lease(slot, false);
    }
    g.unlock();
    const int k = pin(slot);
    release(slot, false);
    return lease(k, true);
  }
  dispatch();
  while (ready_.find(rcvd_) == ready_.end()) {
    if (o_.pin) {
      cv_.wait_for(g, std::chrono::milliseconds(kPollMs), [&] { return ready_.count(rcvd_) || error_.status != Done::ok; });
    } else {
      g.unlock();
      Done d;
      const bool got = pool_->wait(&d, kPollMs);
      g.lock();
      if (got && d.status == Done::ok) {
        take_done(d);
        ready_[d.batch] = d.slot;
      } else if (got) {
        error_ = d;
      }
    }
    if (error_.status != Done::ok) {
      const Done d = error_;
      g.unlock();
      fail(d);
    }
    if (interrupt_requested()) {
      g.unlock();
      halt();
      throw Interrupted("loader interrupted");
    }
    dispatch();
  }
  const int slot = ready_[rcvd_];
  ready_.erase(rcvd_);
  ++rcvd_;
  stats_.wait_s += now_s() - t0;
  dispatch();
  g.unlock();
  return lease(slot, o_.pin);
}

}  // namespace dlb::models::loader
