// Making one batch (see maker.h). Times: read and decode come from the source; transform is the
// table lookups into the slot; collate the labels, indices and header beside them.
#include "models/loader/maker.h"

#include <time.h>

#include <chrono>

#include "models/loader/sampler.h"

namespace dlb::models::loader {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
}  // namespace

BatchMaker::BatchMaker(const Source& src, const MakerConfig& cfg) : src_(src), cfg_(cfg), tf_(cfg.transform) {}

const std::vector<std::uint32_t>& BatchMaker::order(std::int64_t epoch) {
  if (epoch != order_epoch_) {
    order_ = epoch_order(src_.size(), cfg_.seed, static_cast<std::uint64_t>(epoch), cfg_.shuffle);
    order_epoch_ = epoch;
  }
  return order_;
}

const std::uint32_t* BatchMaker::indices(std::int64_t epoch, std::int64_t b, int* n) {
  const auto& o = order(epoch);
  *n = static_cast<int>(batch_size_of(static_cast<std::size_t>(b), o.size(), cfg_.batch));
  return o.data() + batch_first(static_cast<std::size_t>(b), cfg_.batch);
}

void BatchMaker::make(std::int64_t epoch, std::int64_t b, const SlotView& out) {
  const double cpu0 = thread_cpu_s();
  int n = 0;
  const std::uint32_t* idx = indices(epoch, b, &n);
  StageTimes t;
  const std::size_t item = std::size_t(src_.channels()) * src_.height() * src_.width();
  for (int k = 0; k < n; ++k) {
    const SampleView v = src_.sample(idx[k], scratch_, &t);
    const auto t0 = Clock::now();
    tf_(v, draw_for(cfg_.transform, cfg_.seed, static_cast<std::uint64_t>(epoch), idx[k]), out.x + k * item);
    t.transform += since(t0);
  }
  const auto t0 = Clock::now();
  for (int k = 0; k < n; ++k) {
    out.labels[k] = src_.label(idx[k]);
    out.indices[k] = idx[k];
  }
  out.header->epoch = epoch;
  out.header->index = b;
  out.header->n = n;
  t.collate = since(t0);
  out.header->times = t;
  out.header->cpu_s = thread_cpu_s() - cpu0;
}

void reference_batch(const Source& src, const MakerConfig& cfg, std::int64_t epoch, std::int64_t b,
                     std::vector<float>* x, std::vector<std::int32_t>* y, std::vector<std::uint32_t>* idx) {
  const auto order = epoch_order(src.size(), cfg.seed, static_cast<std::uint64_t>(epoch), cfg.shuffle);
  const std::size_t n = batch_size_of(static_cast<std::size_t>(b), order.size(), cfg.batch);
  const std::size_t first = batch_first(static_cast<std::size_t>(b), cfg.batch);
  const std::size_t item = std::size_t(src.channels()) * src.height() * src.width();
  x->assign(n * item, 0.0f);
  y->assign(n, 0);
  idx->assign(order.begin() + static_cast<std::ptrdiff_t>(first), order.begin() + static_cast<std::ptrdiff_t>(first + n));
  SampleScratch s;
  for (std::size_t k = 0; k < n; ++k) {
    const SampleView v = src.sample((*idx)[k], s, nullptr);
    transform_reference(v, cfg.transform, draw_for(cfg.transform, cfg.seed, static_cast<std::uint64_t>(epoch), (*idx)[k]),
                        x->data() + k * item);
    (*y)[k] = src.label((*idx)[k]);
  }
}

}  // namespace dlb::models::loader
