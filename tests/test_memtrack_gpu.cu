// The GPU memory tracker in kernels/cuda/cuda_util (our own device bytes, current and peak, the
// equivalent of torch.cuda.max_memory_allocated) and the driver's cudaMemGetInfo view. Skips
// without a device.
#include <gtest/gtest.h>

#include "kernels/common/errors.h"
#include "kernels/cuda/cuda_util.h"
#include "tests/gpu_test.h"

using namespace dlb;

TEST(MemTrack, AllocAndFreeMoveCurrentBytes) {
  SKIP_WITHOUT_GPU();
  const std::size_t c0 = cuda::current_device_bytes();
  void* p = cuda::device_alloc(1 << 20);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(cuda::current_device_bytes(), c0 + (1 << 20));
  EXPECT_GE(cuda::peak_device_bytes(), c0 + (1 << 20));
  cuda::device_free(p);
  EXPECT_EQ(cuda::current_device_bytes(), c0);
}

TEST(MemTrack, PeakHoldsUntilReset) {
  SKIP_WITHOUT_GPU();
  cuda::reset_peak_device_bytes();
  const std::size_t c0 = cuda::current_device_bytes();
  EXPECT_EQ(cuda::peak_device_bytes(), c0);
  void* a = cuda::device_alloc(4 << 20);
  void* b = cuda::device_alloc(2 << 20);
  cuda::device_free(a);
  EXPECT_EQ(cuda::current_device_bytes(), c0 + (2 << 20));
  EXPECT_EQ(cuda::peak_device_bytes(), c0 + (6 << 20));  // both were held at once
  cuda::device_free(b);
  EXPECT_EQ(cuda::peak_device_bytes(), c0 + (6 << 20));
  cuda::reset_peak_device_bytes();
  EXPECT_EQ(cuda::peak_device_bytes(), c0);
}

TEST(MemTrack, DeviceBufferIsTracked) {
  SKIP_WITHOUT_GPU();
  const std::size_t c0 = cuda::current_device_bytes();
  {
    cuda::DeviceBuffer<float> buf(1000);
    EXPECT_EQ(cuda::current_device_bytes(), c0 + 4000);
    cuda::DeviceBuffer<float> moved(std::move(buf));
    EXPECT_EQ(cuda::current_device_bytes(), c0 + 4000);
  }
  EXPECT_EQ(cuda::current_device_bytes(), c0);
}

TEST(MemTrack, ZeroAndNullAreNoOps) {
  SKIP_WITHOUT_GPU();
  const std::size_t c0 = cuda::current_device_bytes();
  EXPECT_EQ(cuda::device_alloc(0), nullptr);
  cuda::device_free(nullptr);
  EXPECT_EQ(cuda::current_device_bytes(), c0);
}

TEST(MemTrack, ImpossibleSizeIsOutOfMemoryAndLeavesTheTrackerConsistent) {
  SKIP_WITHOUT_GPU();
  cuda::reset_peak_device_bytes();
  const std::size_t c0 = cuda::current_device_bytes(), p0 = cuda::peak_device_bytes();
  EXPECT_THROW(cuda::device_alloc(std::size_t(1) << 50), OutOfMemory);  // 1 PiB
  EXPECT_EQ(cuda::current_device_bytes(), c0);
  EXPECT_EQ(cuda::peak_device_bytes(), p0);
  // The failed cudaMalloc left no sticky error: the next allocation and kernel-free call work.
  void* p = cuda::device_alloc(1 << 20);
  EXPECT_NE(p, nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  cuda::device_free(p);
  EXPECT_EQ(cuda::current_device_bytes(), c0);
}

TEST(MemTrack, MemGetInfoSeesOurAllocations) {
  SKIP_WITHOUT_GPU();
  const auto m0 = cuda::device_mem_info();
  EXPECT_GT(m0.total_bytes, 0u);
  EXPECT_LE(m0.free_bytes, m0.total_bytes);
  EXPECT_EQ(m0.used_bytes(), m0.total_bytes - m0.free_bytes);
  const std::size_t big = std::size_t(256) << 20;
  if (m0.free_bytes < 2 * big) GTEST_SKIP() << "less than 512 MiB free on the device";
  void* p = cuda::device_alloc(big);
  const auto m1 = cuda::device_mem_info();
  EXPECT_EQ(m1.total_bytes, m0.total_bytes);
  // Other processes may allocate meanwhile; ours alone must show (allocation granularity aside).
  EXPECT_LE(m1.free_bytes + big - (2u << 20), m0.free_bytes);
  cuda::device_free(p);
}

TEST(MemTrack, AThrownCudaErrorIsNotReportedAgainByTheNextLaunchCheck) {
  SKIP_WITHOUT_GPU();
  // A non-sticky failure (invalid argument) through DLB_CUDA_CHECK: it throws, and the runtime's
  // last error is cleared, so a later DLB_CUDA_CHECK(cudaGetLastError()) after a good launch passes.
  EXPECT_THROW(DLB_CUDA_CHECK(cudaMemcpy(nullptr, nullptr, 1, cudaMemcpyHostToDevice)), std::runtime_error);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  // The same for an impossible pinned allocation through the macro (out of memory on the drivers we
  // know; the assertion that matters is the cleared last error).
  void* h = nullptr;
  EXPECT_ANY_THROW(DLB_CUDA_CHECK(cudaMallocHost(&h, std::size_t(1) << 50)));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}
