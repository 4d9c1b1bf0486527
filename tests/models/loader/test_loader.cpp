// The data loader (models/loader/loader.h): at every worker count, in threads and in forked processes,
// with and without the pin step and the crop/flip augmentation, over raw batches and PNG files, each
// batch equals bit for bit the reference transform of the same indices in the same order, and every
// epoch visits each sample exactly once; a worker that throws, exits, crashes or is killed ends the
// run with its message, never a hang; a bad image is an InputError naming it; no worker outlives
// the loader.
#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "kernels/common/errors.h"
#include "loader_test_util.h"
#include "models/loader/loader.h"
#include "models/loader/sampler.h"

using namespace dlb::models::loader;
using loader_test::TempDir;

namespace {

// One synthetic set for the whole file: python batches and a PNG folder.
const std::string& dataset() {
  static TempDir dir;
  static const bool made = [] {
    loader_test::make_set(dir.str(), {DiskFormat::python, DiskFormat::png}, 240);
    return true;
  }();
  (void)made;
  return dir.str();
}

std::shared_ptr<const Source> open(Decode d) {
  static std::map<Decode, std::shared_ptr<const Source>> cache;
  auto& s = cache[d];
  if (!s) {
    SourceOptions o;
    o.decode = d;
    s = open_source(dataset(), o);
  }
  return s;
}

bool gone(int pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

struct FaultEnv {
  explicit FaultEnv(const char* v) { ::setenv("DLBENCH_LOADER_FAULT", v, 1); }
  ~FaultEnv() { ::unsetenv("DLBENCH_LOADER_FAULT"); }
};

// Runs epochs until the loader throws; the exception's message ("" when nothing was thrown).
template <class E>
std::string thrown(Loader& l, int epochs = 2) {
  try {
    for (int e = 0; e < epochs; ++e)
      while (BatchLease b = l.next()) {
      }
  } catch (const E& x) {
    return x.what();
  }
  return "";
}

}  // namespace

TEST(LoaderTransform, TableIsTheReference) {
  std::mt19937 rng(5);
  std::vector<std::uint8_t> chw(3 * 32 * 32), hwc(3 * 32 * 32);
  for (auto& v : chw) v = static_cast<std::uint8_t>(rng());
  for (int c = 0; c < 3; ++c)
    for (int p = 0; p < 1024; ++p) hwc[p * 3 + c] = chw[c * 1024 + p];
  for (const Augment a : {Augment::none, Augment::crop_flip}) {
    TransformSpec t;
    t.augment = a;
    t.mean = {0.4914f, 0.4822f, 0.4465f};  // CIFAR's own statistics: not only the seeds' 0.5
    t.std = {0.247f, 0.243f, 0.261f};
    const Transform fast(t);
    for (std::uint64_t i = 0; i < 200; ++i) {
      const Draw d = draw_for(t, 3, 1, i);
      for (const SampleView v : {SampleView{chw.data(), 3, 32, 32, 1024, 32, 1}, SampleView{hwc.data(), 3, 32, 32, 1, 96, 3}}) {
        std::vector<float> ref(3072), got(3072);
        transform_reference(v, t, d, ref.data());
        fast(v, d, got.data());
        ASSERT_EQ(std::memcmp(ref.data(), got.data(), ref.size() * 4), 0) << "sample " << i;
      }
    }
  }
  // the seeds' Normalize(0.5, 0.5): 0 -> -1, 255 -> 1
  std::vector<float> out(3072);
  const std::vector<std::uint8_t> zeros(3072, 0);
  transform_reference(SampleView{zeros.data(), 3, 32, 32, 1024, 32, 1}, TransformSpec{}, Draw{}, out.data());
  EXPECT_EQ(out[0], -1.0f);
}

TEST(LoaderSampler, SeededPermutationPerEpoch) {
  const auto a = epoch_order(1000, 1, 0, true), b = epoch_order(1000, 1, 0, true), c = epoch_order(1000, 1, 1, true);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  auto s = a;
  std::sort(s.begin(), s.end());
  for (std::uint32_t i = 0; i < 1000; ++i) ASSERT_EQ(s[i], i);
  EXPECT_EQ(epoch_order(5, 1, 0, false), (std::vector<std::uint32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(batch_count(240, 32, false), 8u);
  EXPECT_EQ(batch_count(240, 32, true), 7u);
  EXPECT_EQ(batch_size_of(7, 240, 32), 16u);
}

struct Combo {
  int workers;
  WorkerMode mode;
  bool pin;
  Augment augment;
  Decode decode;
};

class LoaderEqualsReference : public ::testing::TestWithParam<Combo> {};

TEST_P(LoaderEqualsReference, EveryBatchBitForBitEverySampleOnce) {
  const Combo c = GetParam();
  const auto src = open(c.decode);
  LoaderOptions o;
  o.batch = 32, o.workers = c.workers, o.mode = c.mode, o.pin = c.pin, o.augment = c.augment, o.seed = 11, o.prefetch = 2;
  Loader loader(src, o);
  MakerConfig cfg;
  cfg.batch = 32, cfg.shuffle = true, cfg.seed = 11, cfg.transform.augment = c.augment;
  std::vector<std::uint32_t> first_epoch;
  for (int e = 0; e < 2; ++e) {
    std::vector<int> seen(src->size(), 0);
    std::vector<std::uint32_t> order;
    std::int64_t expect_index = 0;
    while (BatchLease b = loader.next()) {
      ASSERT_EQ(b->epoch, e);
      ASSERT_EQ(b->index, expect_index++);
      std::vector<float> x;
      std::vector<std::int32_t> y;
      std::vector<std::uint32_t> idx;
      reference_batch(*src, cfg, e, b->index, &x, &y, &idx);
      ASSERT_EQ(static_cast<std::size_t>(b->n), idx.size());
      ASSERT_EQ(std::memcmp(b->indices, idx.data(), idx.size() * 4), 0) << "batch " << b->index;
      ASSERT_EQ(std::memcmp(b->labels, y.data(), y.size() * 4), 0) << "batch " << b->index;
      ASSERT_EQ(std::memcmp(b->x, x.data(), x.size() * 4), 0) << "batch " << b->index;
      for (int k = 0; k < b->n; ++k) seen[b->indices[k]] += 1, order.push_back(b->indices[k]);
    }
    EXPECT_EQ(expect_index, 8);  // 240 / 32: seven full batches and one of 16
    for (std::size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "sample " << i << " in epoch " << e;
    if (e == 0) first_epoch = order;
    else EXPECT_NE(order, first_epoch);  // each epoch its own order
  }
  const LoaderStats s = loader.stats();
  EXPECT_EQ(s.images, 480u);
  EXPECT_EQ(s.batches, 16u);
  EXPECT_GE(s.first_batch_s, 0);
  if (c.decode == Decode::png) {
    EXPECT_GT(s.stages.decode, 0);
  }
  if (c.pin) {
    EXPECT_GT(s.stages.pin, 0);
  }
  const auto pids = loader.worker_pids();
  EXPECT_EQ(pids.size(), c.mode == WorkerMode::process ? static_cast<std::size_t>(c.workers) : 0u);
}

std::vector<Combo> combos() {
  std::vector<Combo> out;
  for (const Decode d : {Decode::none, Decode::png})
    for (const Augment a : {Augment::none, Augment::crop_flip})
      for (const bool pin : {false, true}) {
        out.push_back({0, WorkerMode::thread, pin, a, d});
        for (const WorkerMode m : {WorkerMode::thread, WorkerMode::process})
          for (const int w : {1, 2, 3}) out.push_back({w, m, pin, a, d});
      }
  return out;
}

std::string combo_name(const ::testing::TestParamInfo<Combo>& i) {
  const Combo& c = i.param;
  return std::string(decode_name(c.decode)) + "_" + (c.augment == Augment::none ? "plain" : "cropflip") + "_" +
         (c.pin ? "pin" : "nopin") + "_" + std::to_string(c.workers) + (c.workers ? worker_mode_name(c.mode) : "");
}

INSTANTIATE_TEST_SUITE_P(Loader, LoaderEqualsReference, ::testing::ValuesIn(combos()), combo_name);

TEST(LoaderFaults, AWorkerThatThrowsEndsTheRunWithItsMessage) {
  FaultEnv f("throw@3");
  for (const WorkerMode m : {WorkerMode::thread, WorkerMode::process}) {
    LoaderOptions o;
    o.batch = 16, o.workers = 2, o.mode = m;
    Loader l(open(Decode::none), o);
    const std::string why = thrown<std::runtime_error>(l);
    EXPECT_NE(why.find("loader worker 1: injected fault at batch 3"), std::string::npos) << why;
    for (int pid : l.worker_pids()) EXPECT_TRUE(gone(pid)) << pid;  // stopped behind the error
  }
  LoaderOptions o;  // no workers: the same message, from the caller's thread
  o.batch = 16;
  Loader l(open(Decode::none), o);
  EXPECT_NE(thrown<std::runtime_error>(l).find("injected fault at batch 3"), std::string::npos);
}

TEST(LoaderFaults, AWorkerThatExitsOrCrashesIsNamed) {
  for (const auto& [fault, says] : {std::pair<const char*, const char*>{"exit@2", "died: exited with status 3"},
                                    {"crash@2", "died: killed by signal 11"}}) {
    FaultEnv f(fault);
    LoaderOptions o;
    o.batch = 16, o.workers = 2, o.mode = WorkerMode::process, o.pin = true;
    Loader l(open(Decode::png), o);
    const std::string why = thrown<std::runtime_error>(l);
    EXPECT_NE(why.find("loader worker 0 (pid "), std::string::npos) << why;
    EXPECT_NE(why.find(says), std::string::npos) << why;
  }
}

TEST(LoaderFaults, AKilledWorkerIsNamedAndNothingHangs) {
  LoaderOptions o;
  o.batch = 16, o.workers = 3, o.mode = WorkerMode::process;
  Loader l(open(Decode::png), o);
  const auto pids = l.worker_pids();
  ASSERT_EQ(pids.size(), 3u);
  ASSERT_EQ(::kill(pids[1], SIGKILL), 0);
  const std::string why = thrown<std::runtime_error>(l);
  EXPECT_NE(why.find("loader worker 1 (pid " + std::to_string(pids[1]) + ") died: killed by signal 9"), std::string::npos) << why;
  for (int pid : pids) EXPECT_TRUE(gone(pid)) << pid;
}

TEST(LoaderFaults, ABadImageInAWorkerIsAnInputErrorNamingIt) {
  TempDir t;
  loader_test::make_set(t.str(), {DiskFormat::png}, 100);
  const std::string cat = t / "cifar10-png/train/cat";
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(cat)) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  loader_test::write_bytes(files[0], loader_test::read_bytes(files[0]).substr(0, 100));
  for (const WorkerMode m : {WorkerMode::thread, WorkerMode::process}) {
    LoaderOptions o;
    o.dataset = t.str(), o.batch = 8, o.workers = 2, o.mode = m, o.decode = Decode::png;
    Loader l(o);
    const std::string why = thrown<dlb::InputError>(l, 1);
    EXPECT_NE(why.find("dataset file " + files[0] + " (sample "), std::string::npos) << why;
    EXPECT_NE(why.find("corrupt PNG: truncated"), std::string::npos) << why;
  }
}

TEST(LoaderFaults, NoWorkerOutlivesTheLoader) {
  std::vector<int> pids;
  {
    LoaderOptions o;
    o.batch = 16, o.workers = 2, o.mode = WorkerMode::process;
    Loader l(open(Decode::png), o);
    pids = l.worker_pids();
    BatchLease b = l.next();  // stopped with batches in flight
    ASSERT_TRUE(b);
    for (int pid : pids) EXPECT_FALSE(gone(pid));
  }
  ASSERT_EQ(pids.size(), 2u);
  for (int pid : pids) EXPECT_TRUE(gone(pid)) << pid;
}

TEST(LoaderFaults, HoldingTooManyBatchesIsSaidNotAHang) {
  for (const int workers : {0, 2}) {
    LoaderOptions o;
    o.batch = 8, o.workers = workers, o.prefetch = 1;
    Loader l(open(Decode::none), o);
    std::vector<BatchLease> held;
    EXPECT_THROW(
        {
          for (int k = 0; k < 10; ++k) held.push_back(l.next());
        },
        std::logic_error);
  }
}

TEST(LoaderOptionsText, PresetAndKeys) {
  const LoaderOptions o = parse_loader_options("preset=lecture,pin=on,dataset=/x");
  EXPECT_EQ(o.workers, 2);
  EXPECT_EQ(o.mode, WorkerMode::process);
  EXPECT_TRUE(o.pin);
  EXPECT_EQ(o.decode, Decode::none);
  EXPECT_EQ(o.dataset, "/x");
  EXPECT_EQ(describe_options(o), "workers=2,mode=process,pin=on,prefetch=2,decode=none,augment=none,batch=64,shuffle=on,seed=0");
  EXPECT_THROW(parse_loader_options("workers=-1"), dlb::UsageError);
  EXPECT_THROW(parse_loader_options("colour=red"), dlb::UsageError);
  EXPECT_THROW(parse_loader_options("preset=fast"), dlb::UsageError);
  EXPECT_THROW(parse_loader_options("pin"), dlb::UsageError);
}
