// The loader's device feed (models/loader/device_feed.h) on a GPU: every batch that reaches device
// memory, read back on the work stream right after next() (so only the feed's event orders it after
// the copy), equals the reference batch bit for bit; pinned and pageable, non-blocking and blocking
// copies, no workers and two process workers, two epochs. SKIPPED without a CUDA device.
#include <gtest/gtest.h>

#include <cstring>

#include "loader_test_util.h"
#include "models/loader/device_feed.h"

#ifdef DLB_HAVE_CUDA
#include <cuda_runtime.h>

#include "tests/gpu_test.h"
#endif

using namespace dlb::models::loader;

TEST(LoaderGpu, DeviceBatchesAreTheReferenceBatches) {
#ifndef DLB_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  SKIP_WITHOUT_GPU();
  loader_test::TempDir t;
  loader_test::make_set(t.str(), {DiskFormat::png}, 200);
  SourceOptions so;
  so.decode = Decode::png;
  const std::shared_ptr<const Source> src = open_source(t.str(), so);
  cudaStream_t work = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&work, cudaStreamNonBlocking), cudaSuccess);
  for (const bool pin : {true, false})
    for (const bool non_blocking : {true, false})
      for (const int workers : {0, 2}) {
        LoaderOptions o;
        o.batch = 32, o.workers = workers, o.mode = WorkerMode::process, o.pin = pin, o.seed = 4;
        Loader loader(src, o);
        DeviceFeed feed(loader, 0, work, non_blocking);
        MakerConfig cfg;
        cfg.batch = 32, cfg.seed = 4;
        for (int e = 0; e < 2; ++e) {
          int batches = 0;
          while (const DeviceBatch* d = feed.next()) {
            std::vector<float> x, got;
            std::vector<std::int32_t> y, got_y(static_cast<std::size_t>(d->n));
            std::vector<std::uint32_t> idx;
            reference_batch(*src, cfg, e, d->index, &x, &y, &idx);
            got.resize(x.size());
            ASSERT_EQ(cudaMemcpyAsync(got.data(), d->x, x.size() * 4, cudaMemcpyDeviceToHost, work), cudaSuccess);
            ASSERT_EQ(cudaMemcpyAsync(got_y.data(), d->labels, y.size() * 4, cudaMemcpyDeviceToHost, work), cudaSuccess);
            ASSERT_EQ(cudaStreamSynchronize(work), cudaSuccess);
            ASSERT_EQ(std::memcmp(got.data(), x.data(), x.size() * 4), 0) << "batch " << d->index;
            ASSERT_EQ(got_y, y);
            EXPECT_EQ(d->from_pinned, pin);
            ++batches;
          }
          EXPECT_EQ(batches, 7);
        }
        EXPECT_EQ(feed.stats().batches, 14u);
      }
  cudaStreamDestroy(work);
#endif
}
