// Suite "transfer": how fast bytes move between host and device, and what pinning, async copies and
// overlap with compute buy. Cases:
//   cpu   op memcpy                       host pageable memcpy (always; the only cases without a GPU)
//   cuda  op h2d | d2h | d2d | bidir      host=pageable|pinned|pinned_wc, api=sync|async, size in bytes
//   cuda  op overlap                      batch k+1 copied while batch k is computed, vs serialized
// Every copy is verified before it is timed: the source holds a pattern that changes with every
// verification round, the destination is poisoned first, and every destination byte is compared
// (on the device for device destinations). GB/s = bytes copied / time (bidir: both directions).
// Timing: async copies with CUDA events (manual time); sync copies on the host clock until the copy
// is complete; pageable cases flush the CPU caches before every copy, as bandwidthTest did.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <map>
#include <ostream>
#include <sstream>
#include <vector>

#include "bench/suite.h"
#include "kernels/common/device.h"
#include "kernels/common/pcie.h"
#include "kernels/cpu/memcpy.h"
#ifdef DLB_HAVE_CUDA
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/transfer.h"
#endif

namespace dlb::bench {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kMiB = std::size_t(1) << 20;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Copies per timed iteration: small copies are repeated back to back so launch and event overheads
// are amortized (bandwidthTest repeated each copy too); 16 MiB and up are timed one at a time.
std::size_t copies_per_iteration(std::size_t n) { return n >= 16 * kMiB ? 1 : std::min<std::size_t>(64, 16 * kMiB / n); }

// Cases that flush the caches before each copy run a fixed number of iterations per repetition:
// with manual time Google Benchmark would otherwise repeat a 1 KiB copy (and its 512 MiB flush)
// until the copies alone add up to --min-time.
long flushed_iterations(std::size_t n) { return n >= 256 * kMiB ? 2 : 5; }

CheckResult check_result(const cpu::PatternCheck& c, std::size_t n, const std::string& what) {
  CheckResult r;
  r.ok = c.ok();
  r.max_rel_err = n ? static_cast<double>(c.mismatches) / static_cast<double>(n) : 0.0;  // fraction of bytes wrong
  r.tolerance = 0.0;                                                                     // a copy is exact
  if (!r.ok) r.message = what + ": " + cpu::describe(c, n);
  return r;
}

// pct_of_peak as the harness computed it compares bytes copied with a read+write memory ceiling; a
// copy inside one memory reads and writes every byte, so its share of that ceiling is twice as big.
void traffic_is_twice_the_copy(json& e) {
  if (e.contains("pct_of_peak")) e["pct_of_peak"] = 2.0 * e["pct_of_peak"].get<double>();
}

// ---- cpu: host pageable memcpy ----------------------------------------------------------------

class HostMemcpy final : public Case {
 public:
  HostMemcpy(std::size_t n, bool cold) : n_(n), cold_(cold), inner_(cold ? 1 : copies_per_iteration(n)) {}
  void setup() override {
    // 2 x n for source and destination (+ the flush buffer, checked by CacheFlusher itself).
    cpu::require_host_bytes(2 * n_, "memcpy source + destination");
    if (cold_) flusher_ = std::make_unique<cpu::CacheFlusher>();
    src_ = cpu::host_alloc(n_, "memcpy source");
    dst_ = cpu::host_alloc(n_, "memcpy destination");
  }
  CheckResult verify() override {
    const auto c = cpu::verify_host_copy(cpu::memcpy_host_libc, dst_.get(), src_.get(), n_, ++seed_);
    return check_result(c, n_, "memcpy");
  }
  double run() override {
    if (cold_) flusher_->flush();
    const auto t0 = Clock::now();
    for (std::size_t i = 0; i < inner_; ++i) cpu::memcpy_host_libc(dst_.get(), src_.get(), n_);
    return seconds_since(t0);
  }
  bool manual_time() const override { return true; }  // the flush is not part of the copy
  long iterations() const override { return cold_ ? flushed_iterations(n_) : 0; }
  Work work() const override { return {0, double(n_) * inner_, 0}; }
  Metric metric() const override { return Metric::gb_per_s; }
  void annotate(json& e) const override {
    traffic_is_twice_the_copy(e);
    e["copies_per_iteration"] = inner_;
    if (flusher_) e["flush_bytes"] = flusher_->bytes();
  }
  void teardown() override { src_.reset(), dst_.reset(), flusher_.reset(); }

 private:
  std::size_t n_;
  bool cold_;
  std::size_t inner_;
  std::uint64_t seed_ = 0x7A11;
  cpu::HostPtr src_, dst_;
  std::unique_ptr<cpu::CacheFlusher> flusher_;
};

#ifdef DLB_HAVE_CUDA

// ---- cuda: one copy mode ------------------------------------------------------------------------

enum class Dir { h2d, d2h, d2d, bidir };
enum class HostKind { none, pageable, pinned, pinned_wc };

Dir parse_dir(const std::string& s) {
  if (s == "h2d") return Dir::h2d;
  if (s == "d2h") return Dir::d2h;
  if (s == "d2d") return Dir::d2d;
  if (s == "bidir") return Dir::bidir;
  throw UsageError("transfer: unknown op '" + s + "' (expected h2d, d2h, d2d, bidir, overlap)");
}
HostKind parse_host(const std::string& s) {
  if (s == "pageable") return HostKind::pageable;
  if (s == "pinned") return HostKind::pinned;
  if (s == "pinned_wc") return HostKind::pinned_wc;
  throw UsageError("transfer: unknown host memory '" + s + "' (expected pageable, pinned, pinned_wc)");
}

// Host memory of one kind: malloc (pageable) or cudaHostAlloc (pinned, optionally write-combined).
class HostMem {
 public:
  HostMem() = default;
  HostMem(std::size_t n, HostKind kind, const std::string& what) {
    cpu::require_host_bytes(n, what);
    if (kind == HostKind::pageable) {
      pageable_ = cpu::host_alloc(n, what);
      p_ = pageable_.get();
    } else {
      pinned_ = cuda::PinnedBuffer(n, kind == HostKind::pinned_wc, what);
      p_ = pinned_.data();
    }
  }
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
  cpu::HostPtr pageable_;
  cuda::PinnedBuffer pinned_;
};

using cuda::Event;
using cuda::Stream;

// Refuses up front what cannot fit on the device (cudaMemGetInfo), so the case is "out of memory"
// without a failed cudaMalloc in the driver's log.
void require_device_bytes(std::size_t bytes, const std::string& what) {
  const auto m = cuda::device_mem_info();
  if (bytes > m.free_bytes)
    throw OutOfMemory("device: " + what + " needs " + std::to_string(bytes) + " bytes, " + std::to_string(m.free_bytes) +
                      " free");
}

// What every GPU case records: our own peak device bytes since its setup began (the tracker in
// cuda_util), the driver's view after its allocations, and the PCIe ceiling for host links.
struct GpuFacts {
  std::size_t free_after_setup = 0, total = 0;
  double link_gb_per_s = 0;
  std::string link;
  void take(int dev) {
    const auto m = cuda::device_mem_info();
    free_after_setup = m.free_bytes, total = m.total_bytes;
    link_gb_per_s = cuda::pcie_link_gb_per_s(dev, &link);
  }
  void annotate(json& e) const {
    e["peak_device_bytes"] = cuda::peak_device_bytes();
    e["device_free_bytes"] = free_after_setup;
    e["device_total_bytes"] = total;
  }
};

class GpuCopy final : public Case {
 public:
  GpuCopy(int dev, Dir dir, HostKind host, bool async, std::size_t n)
      : dev_(dev), dir_(dir), host_(host), async_(async), n_(n),
        inner_(host == HostKind::pageable ? 1 : copies_per_iteration(n)) {}

  void setup() override {
    DLB_CUDA_CHECK(cudaSetDevice(dev_));
    cuda::reset_peak_device_bytes();
    const bool two = dir_ == Dir::d2d || dir_ == Dir::bidir;
    require_device_bytes(two ? 2 * n_ : n_, "copy buffers");
    if (dir_ != Dir::d2d) require_host_bytes_for_case();
    // Host side: h2d reads h_src_, d2h writes h_dst_, bidir both at once.
    if (dir_ == Dir::h2d || dir_ == Dir::bidir) h_src_ = HostMem(n_, host_, "host source");
    if (dir_ == Dir::d2h || dir_ == Dir::bidir) h_dst_ = HostMem(n_, host_, "host destination");
    // Device side: h2d writes d_dst_, d2h reads d_src_, d2d both.
    if (dir_ != Dir::d2h) d_dst_ = cuda::DeviceBuffer<unsigned char>(n_);
    if (dir_ != Dir::h2d) d_src_ = cuda::DeviceBuffer<unsigned char>(n_);
    if (host_ == HostKind::pageable) flusher_ = std::make_unique<cpu::CacheFlusher>();
    s0_ = std::make_unique<Stream>(), s1_ = std::make_unique<Stream>();
    start_ = std::make_unique<Event>(), stop_ = std::make_unique<Event>(), join_ = std::make_unique<Event>();
    facts_.take(dev_);
  }

  CheckResult verify() override {
    DLB_CUDA_CHECK(cudaSetDevice(dev_));
    const std::uint64_t seed = ++seed_;
    const std::uint64_t seed2 = seed ^ (1ULL << 63);  // bidir's second direction carries other bytes
    // Sources get this round's pattern, destinations a poison.
    if (h_src_.get()) cpu::fill_pattern(h_src_.get(), n_, seed);
    if (d_src_.data()) cuda::pattern_fill(d_src_.data(), n_, dir_ == Dir::bidir ? seed2 : seed, *s0_);
    if (h_dst_.get()) cpu::fill_pattern(h_dst_.get(), n_, cpu::poison_seed(seed2));
    if (d_dst_.data()) cuda::pattern_fill(d_dst_.data(), n_, cpu::poison_seed(seed), *s0_);
    DLB_CUDA_CHECK(cudaStreamSynchronize(*s0_));
    copy_round(1);
    CheckResult r;
    r.ok = true;
    if (d_dst_.data()) r = check_result(cuda::pattern_check(d_dst_.data(), n_, seed, *s0_), n_, "device destination");
    if (r.ok && h_dst_.get())
      r = check_result(cpu::check_pattern(h_dst_.get(), n_, dir_ == Dir::bidir ? seed2 : seed), n_, "host destination");
    return r;
  }

  double run() override {
    DLB_CUDA_CHECK(cudaSetDevice(dev_));
    if (flusher_) flusher_->flush();  // pageable: the CPU's staging copy starts from cold caches
    return copy_round(inner_);
  }

  bool manual_time() const override { return true; }
  long iterations() const override { return flusher_ ? flushed_iterations(n_) : 0; }
  Work work() const override { return {0, double(n_) * inner_ * (dir_ == Dir::bidir ? 2 : 1), 0}; }
  Metric metric() const override { return Metric::gb_per_s; }

  void annotate(json& e) const override {
    facts_.annotate(e);
    e["copies_per_iteration"] = inner_;
    e["timer"] = async_ ? "cuda_events" : "host_clock";
    if (flusher_) e["flush_bytes"] = flusher_->bytes();
    if (dir_ == Dir::d2d) {
      traffic_is_twice_the_copy(e);  // the harness's ceiling for a GPU's gb_per_s is its DRAM
      return;
    }
    // Host links: the DRAM ceiling the harness used does not apply; the PCIe link's does, when known.
    e.erase("pct_of_peak");
    if (facts_.link_gb_per_s > 0) {
      const double dirs = dir_ == Dir::bidir ? 2 : 1, ceiling = facts_.link_gb_per_s * dirs;
      const double measured = e.contains("gb_per_s") ? e["gb_per_s"].get<double>() : 0;
      e["link"] = facts_.link;
      e["link_gb_per_s"] = ceiling;
      // A virtual bridge's reading (below Gen3 x8) or one a copy beats is no ceiling: no pct_of_peak.
      const std::string doubt = pcie_ceiling_doubt(facts_.link_gb_per_s, measured / dirs);
      if (!doubt.empty()) e["link_ceiling_dropped"] = doubt;
      else if (measured > 0) e["pct_of_peak"] = 100.0 * measured / ceiling;
    }
  }

  void teardown() override {
    h_src_ = HostMem(), h_dst_ = HostMem();
    d_src_ = cuda::DeviceBuffer<unsigned char>(), d_dst_ = cuda::DeviceBuffer<unsigned char>();
    flusher_.reset();
  }

 private:
  void require_host_bytes_for_case() const {
    cpu::require_host_bytes(dir_ == Dir::bidir ? 2 * n_ : n_, "host buffers");
  }

  // `count` copies in the case's mode; returns their seconds (events for async, host clock for sync).
  double copy_round(std::size_t count) {
    const cudaMemcpyKind kind = dir_ == Dir::h2d ? cudaMemcpyHostToDevice
                                : dir_ == Dir::d2h ? cudaMemcpyDeviceToHost
                                                   : cudaMemcpyDeviceToDevice;
    void* dst = dir_ == Dir::h2d || dir_ == Dir::bidir ? d_dst_.data() : dir_ == Dir::d2h ? h_dst_.get() : d_dst_.data();
    const void* src = dir_ == Dir::h2d || dir_ == Dir::bidir ? h_src_.get() : d_src_.data();
    if (!async_) {
      // cudaMemcpy on the legacy default stream; a device-to-device (and a small pageable
      // host-to-device) cudaMemcpy may return before the bytes land, so wait for the device too.
      const auto t0 = Clock::now();
      for (std::size_t i = 0; i < count; ++i) DLB_CUDA_CHECK(cudaMemcpy(dst, src, n_, kind));
      DLB_CUDA_CHECK(cudaDeviceSynchronize());
      return seconds_since(t0);
    }
    DLB_CUDA_CHECK(cudaEventRecord(*start_, *s0_));
    if (dir_ == Dir::bidir) {
      // H2D on s0 and D2H on s1 at once: s1 starts with s0's start event, s0 ends after s1's join.
      DLB_CUDA_CHECK(cudaStreamWaitEvent(*s1_, *start_, 0));
      for (std::size_t i = 0; i < count; ++i) {
        DLB_CUDA_CHECK(cudaMemcpyAsync(d_dst_.data(), h_src_.get(), n_, cudaMemcpyHostToDevice, *s0_));
        DLB_CUDA_CHECK(cudaMemcpyAsync(h_dst_.get(), d_src_.data(), n_, cudaMemcpyDeviceToHost, *s1_));
      }
      DLB_CUDA_CHECK(cudaEventRecord(*join_, *s1_));
      DLB_CUDA_CHECK(cudaStreamWaitEvent(*s0_, *join_, 0));
    } else {
      for (std::size_t i = 0; i < count; ++i) DLB_CUDA_CHECK(cudaMemcpyAsync(dst, src, n_, kind, *s0_));
    }
    DLB_CUDA_CHECK(cudaEventRecord(*stop_, *s0_));
    DLB_CUDA_CHECK(cudaEventSynchronize(*stop_));
    return cuda::elapsed_seconds(*start_, *stop_);
  }

  int dev_;
  Dir dir_;
  HostKind host_;
  bool async_;
  std::size_t n_, inner_;
  std::uint64_t seed_ = 0xC0FFEE;
  HostMem h_src_, h_dst_;
  cuda::DeviceBuffer<unsigned char> d_src_, d_dst_;
  std::unique_ptr<cpu::CacheFlusher> flusher_;
  std::unique_ptr<Stream> s0_, s1_;
  std::unique_ptr<Event> start_, stop_, join_;
  GpuFacts facts_;
};

// ---- cuda: copy/compute overlap ---------------------------------------------------------------
//
// B batches of n bytes (n/4 floats) in pinned host memory go to the device through two device
// buffers (double buffering); a compute kernel balanced to take about as long as one batch's copy
// works on each. Overlapped: copies on one stream, kernels on another, so batch k+1 is in flight
// while batch k is computed. Serialized: the same work on one stream. The timed figure (gb_per_s) is
// the overlapped pipeline's B*n / time; speedup = serialized / overlapped, and
// overlap_fraction = (serialized - overlapped) / min(total copy time, total compute time): 1 when the
// shorter of the two is fully hidden, 0 when nothing is. With B batches the first copy and the last
// kernel cannot overlap anything, so a perfect pipeline of balanced stages reaches (B-1)/B and a
// speedup of 2B/(B+1) (16 batches: 0.94 and 1.88x).
class Overlap final : public Case {
 public:
  Overlap(int dev, std::size_t n) : dev_(dev), n_(n), nf_(n / sizeof(float)) {
    // 4..16 batches, at most 2 GiB of pinned host memory in all.
    batches_ = std::clamp<std::size_t>((std::size_t(2) << 30) / std::max<std::size_t>(n, 1), 4, 16);
  }

  void setup() override {
    DLB_CUDA_CHECK(cudaSetDevice(dev_));
    cuda::reset_peak_device_bytes();
    if (nf_ == 0) throw Unsupported("overlap needs at least 4 bytes per batch");
    require_device_bytes(2 * n_, "overlap double buffer");
    host_ = HostMem(batches_ * n_, HostKind::pinned, "overlap batches");
    sc_ptr_ = std::make_unique<Stream>(), sk_ptr_ = std::make_unique<Stream>();
    sc_ = *sc_ptr_, sk_ = *sk_ptr_;
    for (auto& b : dbuf_) b = cuda::DeviceBuffer<float>(nf_);
    nsamples_ = std::min<std::size_t>(256, nf_);
    stride_ = nf_ / nsamples_;
    nsamples_ = (nf_ + stride_ - 1) / stride_;
    sums_ = cuda::DeviceBuffer<unsigned long long>(batches_);
    samples_ = cuda::DeviceBuffer<float>(batches_ * nsamples_);
    ev_.resize(2 * batches_ + 1);
    for (auto& e : ev_) e = std::make_unique<Event>();
    for (auto& e : copied_) e = std::make_unique<Event>();
    for (auto& e : computed_) e = std::make_unique<Event>();
    facts_.take(dev_);
    calibrate();
  }

  CheckResult verify() override {
    DLB_CUDA_CHECK(cudaSetDevice(dev_));
    const std::uint64_t seed = ++seed_;
    auto* h = static_cast<float*>(host_.get());
    std::vector<unsigned long long> want(batches_, 0);
    for (std::size_t k = 0; k < batches_; ++k)
      for (std::size_t i = 0; i < nf_; ++i) {
        const float v = cpu::pattern_float(seed + k, i);
        h[k * nf_ + i] = v;
        std::uint32_t bits;
        std::memcpy(&bits, &v, 4);
        want[k] += bits;
      }
    for (bool overlapped : {true, false}) {
      DLB_CUDA_CHECK(cudaMemsetAsync(samples_.data(), 0xFF, samples_.bytes(), sc_));  // NaN poison
      pipeline(overlapped, /*with_samples=*/true);
      std::vector<unsigned long long> got(batches_);
      std::vector<float> samp(batches_ * nsamples_);
      sums_.download(got.data(), batches_);
      samples_.download(samp.data(), samp.size());
      const char* mode = overlapped ? "overlapped" : "serialized";
      for (std::size_t k = 0; k < batches_; ++k) {
        if (got[k] != want[k])
          return fail("batch " + std::to_string(k) + " (" + mode + "): the kernel read other bytes than were copied");
        for (std::size_t j = 0; j < nsamples_; ++j) {
          const float ref = cuda::overlap_compute_reference(cpu::pattern_float(seed + k, j * stride_), iters_);
          if (std::memcmp(&ref, &samp[k * nsamples_ + j], 4) != 0)
            return fail("batch " + std::to_string(k) + " (" + mode + "): output " + std::to_string(j * stride_) +
                        " differs from the host reference");
        }
      }
    }
    CheckResult r;
    r.ok = true;
    return r;
  }

  double run() override {
    DLB_CUDA_CHECK(cudaSetDevice(dev_));
    const double serial = pipeline(false, false);
    double tc = 0, tk = 0;
    for (std::size_t k = 0; k < batches_; ++k) {
      tc += cuda::elapsed_seconds(*ev_[2 * k], *ev_[2 * k + 1]);
      tk += cuda::elapsed_seconds(*ev_[2 * k + 1], *ev_[2 * k + 2]);
    }
    const double over = pipeline(true, false);
    serial_.push_back(serial), overlapped_.push_back(over), copy_.push_back(tc), compute_.push_back(tk);
    return over;
  }

  bool manual_time() const override { return true; }
  Work work() const override { return {0, double(n_) * batches_, 0}; }
  Metric metric() const override { return Metric::gb_per_s; }

  void annotate(json& e) const override {
    facts_.annotate(e);
    e.erase("pct_of_peak");
    e["batches"] = batches_;
    e["kernel_iters"] = iters_;
    if (serial_.empty()) return;
    const double ts = median(serial_), to = median(overlapped_), tc = median(copy_), tk = median(compute_);
    e["serialized_s"] = ts;
    e["overlapped_s"] = to;
    e["copy_s"] = tc;
    e["compute_s"] = tk;
    e["speedup"] = to > 0 ? ts / to : 0.0;
    e["overlap_fraction"] = std::min(tc, tk) > 0 ? (ts - to) / std::min(tc, tk) : 0.0;
  }

  void teardown() override {
    host_ = HostMem();
    for (auto& b : dbuf_) b = cuda::DeviceBuffer<float>();
    sums_ = {}, samples_ = {};
  }

 private:
  static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  }
  static CheckResult fail(const std::string& why) {
    CheckResult r;
    r.ok = false;
    r.max_rel_err = 1.0;
    r.message = why;
    return r;
  }

  // Enqueues the whole pipeline and waits for it; returns its seconds (events). Serialized runs
  // record ev_[2k] before copy k, ev_[2k+1] between copy k and kernel k, ev_[2k+2] after kernel k.
  double pipeline(bool overlapped, bool with_samples) {
    DLB_CUDA_CHECK(cudaMemsetAsync(sums_.data(), 0, sums_.bytes(), sc_));
    const auto* h = static_cast<const unsigned char*>(host_.get());
    auto kernel = [&](std::size_t k, cudaStream_t s) {
      cuda::overlap_compute(dbuf_[k % 2].data(), nf_, iters_, sums_.data() + k,
                            with_samples ? samples_.data() + k * nsamples_ : nullptr, stride_, s);
    };
    if (!overlapped) {
      DLB_CUDA_CHECK(cudaEventRecord(*ev_[0], sc_));
      for (std::size_t k = 0; k < batches_; ++k) {
        DLB_CUDA_CHECK(cudaMemcpyAsync(dbuf_[k % 2].data(), h + k * n_, n_, cudaMemcpyHostToDevice, sc_));
        DLB_CUDA_CHECK(cudaEventRecord(*ev_[2 * k + 1], sc_));
        kernel(k, sc_);
        DLB_CUDA_CHECK(cudaEventRecord(*ev_[2 * k + 2], sc_));
      }
      DLB_CUDA_CHECK(cudaEventSynchronize(*ev_[2 * batches_]));
      return cuda::elapsed_seconds(*ev_[0], *ev_[2 * batches_]);
    }
    DLB_CUDA_CHECK(cudaEventRecord(*ev_[0], sc_));
    DLB_CUDA_CHECK(cudaStreamWaitEvent(sk_, *ev_[0], 0));
    for (std::size_t k = 0; k < batches_; ++k) {
      const std::size_t b = k % 2;
      if (k >= 2) DLB_CUDA_CHECK(cudaStreamWaitEvent(sc_, *computed_[b], 0));  // buffer b is free again
      DLB_CUDA_CHECK(cudaMemcpyAsync(dbuf_[b].data(), h + k * n_, n_, cudaMemcpyHostToDevice, sc_));
      DLB_CUDA_CHECK(cudaEventRecord(*copied_[b], sc_));
      DLB_CUDA_CHECK(cudaStreamWaitEvent(sk_, *copied_[b], 0));
      kernel(k, sk_);
      DLB_CUDA_CHECK(cudaEventRecord(*computed_[b], sk_));
    }
    DLB_CUDA_CHECK(cudaEventRecord(*ev_[1], sk_));  // after the last kernel, which follows every copy
    DLB_CUDA_CHECK(cudaEventSynchronize(*ev_[1]));
    return cuda::elapsed_seconds(*ev_[0], *ev_[1]);
  }

  // Picks the kernel's FMA chain so one batch's compute takes about one batch's copy: that is where
  // overlap can win the most (up to 2x).
  void calibrate() {
    const int probe = 256;
    auto time_copy = [&] {
      DLB_CUDA_CHECK(cudaEventRecord(*ev_[0], sc_));
      DLB_CUDA_CHECK(cudaMemcpyAsync(dbuf_[0].data(), host_.get(), n_, cudaMemcpyHostToDevice, sc_));
      DLB_CUDA_CHECK(cudaEventRecord(*ev_[1], sc_));
      DLB_CUDA_CHECK(cudaEventSynchronize(*ev_[1]));
      return cuda::elapsed_seconds(*ev_[0], *ev_[1]);
    };
    auto time_kernel = [&] {
      DLB_CUDA_CHECK(cudaEventRecord(*ev_[0], sc_));
      cuda::overlap_compute(dbuf_[1].data(), nf_, probe, sums_.data(), nullptr, 1, sc_);
      DLB_CUDA_CHECK(cudaEventRecord(*ev_[1], sc_));
      DLB_CUDA_CHECK(cudaEventSynchronize(*ev_[1]));
      return cuda::elapsed_seconds(*ev_[0], *ev_[1]);
    };
    DLB_CUDA_CHECK(cudaMemsetAsync(dbuf_[1].data(), 0, n_, sc_));
    time_copy(), time_kernel();  // warm-up
    const double tc = std::min(time_copy(), time_copy()), tk = std::min(time_kernel(), time_kernel());
    iters_ = tk > 0 ? static_cast<int>(std::clamp(std::lround(probe * tc / tk), 1L, 65536L)) : probe;
  }

  int dev_;
  std::size_t n_, nf_, batches_ = 4, nsamples_ = 1, stride_ = 1;
  int iters_ = 256;
  std::uint64_t seed_ = 0x0E1A9;
  HostMem host_;
  cuda::DeviceBuffer<float> dbuf_[2];
  cuda::DeviceBuffer<unsigned long long> sums_;
  cuda::DeviceBuffer<float> samples_;
  std::unique_ptr<Stream> sc_ptr_, sk_ptr_;  // copies, kernels (created on the case's device in setup)
  cudaStream_t sc_ = nullptr, sk_ = nullptr;
  std::vector<std::unique_ptr<Event>> ev_;
  std::unique_ptr<Event> copied_[2], computed_[2];
  std::vector<double> serial_, overlapped_, copy_, compute_;
  GpuFacts facts_;
};

#endif  // DLB_HAVE_CUDA

// 1024 -> "1 KiB", 3000000 -> "3 MB", 4099 -> "4099 B".
std::string fmt_bytes(long long b) {
  const char* bin[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  const char* dec[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  long long v = b;
  if (b > 0 && b % 1024 == 0) {
    while (v % 1024 == 0 && u < 4) v /= 1024, ++u;
    return std::to_string(v) + " " + bin[u];
  }
  while (v > 0 && v % 1000 == 0 && u < 4) v /= 1000, ++u;
  return std::to_string(v) + " " + dec[u];
}

// Bandwidth by size (columns) for each mode (rows), then the overlap experiment.
void summarize(const std::vector<json>& records, std::ostream& out) {
  std::vector<long long> sizes;
  std::vector<std::string> modes;
  std::map<std::pair<std::string, long long>, std::string> cell;
  std::vector<std::vector<std::string>> overlap;
  for (const auto& r : records) {
    const std::string op = r.value("op", "");
    const long long size = r.value("size", 0LL);
    const bool err = r.value("error_occurred", false);
    if (op == "overlap") {
      if (!err && r.contains("speedup")) {
        char sp[32], fr[32];
        std::snprintf(sp, sizeof sp, "%.2fx", r["speedup"].get<double>());
        std::snprintf(fr, sizeof fr, "%.2f", r["overlap_fraction"].get<double>());
        overlap.push_back({r.value("device", ""), fmt_bytes(size), sp, fr});
      }
      continue;
    }
    std::string mode = r.value("device", "") + " " + op;
    if (r.contains("host")) mode += " " + r.value("host", "");
    if (r.contains("api")) mode += " " + r.value("api", "");
    if (r.contains("cache")) mode += " " + r.value("cache", "") + "-cache";
    if (std::find(modes.begin(), modes.end(), mode) == modes.end()) modes.push_back(mode);
    if (std::find(sizes.begin(), sizes.end(), size) == sizes.end()) sizes.push_back(size);
    std::string v = "-";
    if (r.value("error", "") == "out of memory") v = "OOM";
    else if (r.contains("skipped")) v = "skip";
    else if (err) v = "FAIL";
    else if (r.contains("gb_per_s")) {
      char b[32];
      std::snprintf(b, sizeof b, "%.2f", r["gb_per_s"].get<double>());
      v = b;
    }
    cell[{mode, size}] = v;
  }
  std::sort(sizes.begin(), sizes.end());
  if (!modes.empty()) {
    out << "\nTransfer bandwidth, GB/s (1e9 B/s, median) by size\n\n";
    std::size_t w0 = 4;
    for (const auto& m : modes) w0 = std::max(w0, m.size());
    out << std::left << std::setw(static_cast<int>(w0)) << "Mode";
    for (long long s : sizes) out << " | " << std::right << std::setw(9) << fmt_bytes(s);
    out << "\n";
    for (const auto& m : modes) {
      out << std::left << std::setw(static_cast<int>(w0)) << m;
      for (long long s : sizes) {
        auto it = cell.find({m, s});
        out << " | " << std::right << std::setw(9) << (it == cell.end() ? "" : it->second);
      }
      out << "\n";
    }
  }
  if (!overlap.empty()) {
    out << "\nCopy/compute overlap (pinned H2D + kernel, batch size per copy)\n\n";
    out << "Device  | Batch     | Speedup | Overlap fraction\n";
    for (const auto& row : overlap)
      out << std::left << std::setw(7) << row[0] << " | " << std::setw(9) << row[1] << " | " << std::setw(7) << row[2]
          << " | " << row[3] << "\n";
  }
}

std::vector<CaseSpec> expand(const SuiteOptions& o) {
  std::vector<CaseSpec> cases;
  const auto sizes = axis_ints(o, "size");
  const auto caches = axis_strings(o, "cache");
  for (const auto& c : caches)
    if (c != "cold" && c != "hot") throw UsageError("transfer: unknown cache mode '" + c + "' (expected cold, hot)");
  for (const auto& dev : o.devices) {
    if (dev == "cpu") {
      for (const auto& c : caches)
        for (long long n : sizes) {
          CaseId id{"transfer", "memcpy", dev, "u8", {}};
          id.with("host", "pageable").with("cache", c).with("size", n);
          const bool cold = c == "cold";
          cases.push_back({id, [n, cold] { return std::make_unique<HostMemcpy>(static_cast<std::size_t>(n), cold); }});
        }
      continue;
    }
#ifdef DLB_HAVE_CUDA
    if (!is_gpu(dev)) continue;
    const int g = gpu_index(dev);
    const auto ops = axis_strings(o, "op");
    const auto hosts = axis_strings(o, "host");
    const auto apis = axis_strings(o, "api");
    for (const auto& h : hosts) parse_host(h);
    for (const auto& a : apis)
      if (a != "sync" && a != "async") throw UsageError("transfer: unknown api '" + a + "' (expected sync, async)");
    for (const auto& op : ops) {
      if (op == "overlap") {
        // Batches of 1 MiB..256 MiB: smaller ones are all launch overhead, larger ones leave too few.
        for (long long n : sizes) {
          if (n < (1 << 20) || n > (256LL << 20) || n % 4) continue;
          CaseId id{"transfer", "overlap", dev, "fp32", {}};
          id.with("host", "pinned").with("api", "async").with("size", n);
          cases.push_back({id, [g, n] { return std::make_unique<Overlap>(g, static_cast<std::size_t>(n)); }});
        }
        continue;
      }
      const Dir d = parse_dir(op);
      for (long long n : sizes) {
        if (d == Dir::d2d) {
          for (const auto& a : apis) {
            CaseId id{"transfer", op, dev, "u8", {}};
            id.with("host", "none").with("api", a).with("size", n);
            const bool async = a == "async";
            cases.push_back({id, [g, n, async] {
                               return std::make_unique<GpuCopy>(g, Dir::d2d, HostKind::none, async, static_cast<std::size_t>(n));
                             }});
          }
          continue;
        }
        for (const auto& h : hosts) {
          // Write-combined memory is for the CPU to write and the GPU to read: CPU reads of it are
          // uncached, so it is offered for h2d only.
          if (h == "pinned_wc" && d != Dir::h2d) continue;
          for (const auto& a : apis) {
            // Two directions at once need two streams: cudaMemcpy's legacy default stream would
            // serialize them, so bidir is async only.
            if (d == Dir::bidir && a == "sync") continue;
            CaseId id{"transfer", op, dev, "u8", {}};
            id.with("host", h).with("api", a).with("size", n);
            const HostKind hk = parse_host(h);
            const bool async = a == "async";
            cases.push_back({id, [g, d, hk, async, n] {
                               return std::make_unique<GpuCopy>(g, d, hk, async, static_cast<std::size_t>(n));
                             }});
          }
        }
      }
    }
#endif
  }
  return cases;
}

}  // namespace

DLB_SUITE(transfer)
    .about("Host<->device copies: pageable vs pinned, sync vs async, overlap with compute; host memcpy")
    .axis("size", {1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864, 268435456, 1073741824},
          {1024, 1048576, 67108864})
    .axis("op", {"h2d", "d2h", "d2d", "bidir", "overlap"})
    .axis("host", {"pageable", "pinned", "pinned_wc"})
    .axis("api", {"sync", "async"})
    .axis("cache", {"cold"})  // or "hot": the source already in the caches (host memcpy)
    .takes({flag::size_bytes()})
    .no_blas_from_pool()
    .cases(expand)
    .summary(summarize);

}  // namespace dlb::bench
