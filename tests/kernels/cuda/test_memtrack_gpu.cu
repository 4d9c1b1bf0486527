// The GPU memory tracker in kernels/cuda/cuda_util (our own device bytes, current and peak, the
// equivalent of torch.cuda.max_memory_allocated) and the driver's cudaMemGetInfo view; the per-stream
// scratch of kernels/cuda/stream_scratch.cpp (cuBLAS workspaces, gemm_f32's operand copies), which it
// counts. Skips without a device.
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/common/errors.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/handles.h"
#include "kernels/cuda/stream_scratch.h"
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

TEST(CudaRaii, PinnedBufferGrowsAndRefusesTheImpossible) {
  SKIP_WITHOUT_GPU();
  cuda::PinnedBuffer b;
  EXPECT_EQ(b.data(), nullptr);
  b.ensure(4096);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(b.bytes(), 4096u);
  static_cast<char*>(b.data())[4095] = 1;  // host-writable
  void* first = b.data();
  b.ensure(1024);  // smaller: kept
  EXPECT_EQ(b.data(), first);
  b.ensure(1 << 20);
  EXPECT_EQ(b.bytes(), std::size_t(1) << 20);
  cuda::PinnedBuffer moved(std::move(b));
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_NE(moved.data(), nullptr);
  EXPECT_THROW(cuda::PinnedBuffer(std::size_t(1) << 50, false, "a petabyte"), OutOfMemory);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(CudaRaii, StreamAndEventsTimeACopy) {
  SKIP_WITHOUT_GPU();
  cuda::Stream s;
  cuda::Event a, b, order(false);
  cuda::PinnedBuffer h(1 << 20);
  cuda::DeviceBuffer<unsigned char> d(1 << 20);
  ASSERT_EQ(cudaEventRecord(a, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d.data(), h.data(), 1 << 20, cudaMemcpyHostToDevice, s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(b, s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(order, s), cudaSuccess);
  EXPECT_GT(cuda::elapsed_seconds(a, b), 0.0);
  // A timing-disabled event orders work but cannot be timed.
  float ms = 0;
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, order), cudaErrorInvalidResourceHandle);
  (void)cudaGetLastError();
}

// A stream's scratch (kernels/cuda/stream_scratch.h) is allocated once per slot, counted by the
// tracker, grown only when a larger size is asked, and freed when its cuda::Stream is destroyed: a
// case's peak never carries the previous case's buffers. Not yet run on a GPU.
TEST(MemTrack, StreamScratchGrowsOnceAndIsFreedWithItsStream) {
  SKIP_WITHOUT_GPU();
  const std::size_t c0 = cuda::current_device_bytes();
  {
    cuda::Stream s;
    void* a = cuda::stream_scratch(s, cuda::ScratchSlot::half_a, 1 << 20, "test");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(cuda::current_device_bytes(), c0 + (1 << 20));
    EXPECT_EQ(cuda::stream_scratch(s, cuda::ScratchSlot::half_a, 1 << 10, "test"), a);  // smaller: the same
    void* b = cuda::stream_scratch(s, cuda::ScratchSlot::half_b, 1 << 20, "test");
    EXPECT_NE(b, a);  // another slot, another buffer
    cuda::stream_scratch(s, cuda::ScratchSlot::half_a, 4 << 20, "test");  // grown: the old one freed
    EXPECT_EQ(cuda::current_device_bytes(), c0 + (5 << 20));
    cuda::Stream other;
    EXPECT_NE(cuda::stream_scratch(other, cuda::ScratchSlot::half_b, 1 << 20, "test"), b);  // per stream
    EXPECT_EQ(cuda::current_device_bytes(), c0 + (6 << 20));
  }
  EXPECT_EQ(cuda::current_device_bytes(), c0);
}

// Growing inside capture throws the caller's reason (and leaves the capture to be ended).
TEST(MemTrack, StreamScratchRefusesToGrowInsideCapture) {
  SKIP_WITHOUT_GPU();
  cuda::Stream s;
  void* a = cuda::stream_scratch(s, cuda::ScratchSlot::half_a, 1 << 20, "test");
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(cuda::stream_scratch(s, cuda::ScratchSlot::half_a, 1 << 20, "grow"), a);  // fits: no allocation
  try {
    cuda::stream_scratch(s, cuda::ScratchSlot::half_a, 2 << 20, "grow inside capture");
    ADD_FAILURE() << "grew inside capture";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "grow inside capture");
  }
  cudaGraph_t g = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  if (g) cudaGraphDestroy(g);
}

// Under DLB_CUBLAS_WORKSPACE=1 cublas_handle_on gives each stream its own workspace (one of its
// scratch slots), allocated once and freed with the stream. The switch is read once, at the
// process's first cuBLAS binding: this test sets it, and no test before it in this binary binds
// cuBLAS. Not yet run on a GPU.
TEST(MemTrack, CublasWorkspaceOncePerStreamFreedWithIt) {
  SKIP_WITHOUT_GPU();
  setenv("DLB_CUBLAS_WORKSPACE", "1", 1);
  int dev = 0, major = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), cudaSuccess);
  const std::size_t ws = std::size_t(major >= 9 ? 32 : 4) << 20;
  const std::size_t c0 = cuda::current_device_bytes();
  {
    std::vector<cuda::Stream> streams(3);
    cuda::cublas_handle_on(streams[0]);
    EXPECT_EQ(cuda::current_device_bytes(), c0 + ws);
    cuda::cublas_handle_on(streams[0]);
    EXPECT_EQ(cuda::current_device_bytes(), c0 + ws);  // the same stream: not a second one
    for (cuda::Stream& s : streams) cuda::cublas_handle_on(s);
    EXPECT_EQ(cuda::current_device_bytes(), c0 + 3 * ws);
  }
  EXPECT_EQ(cuda::current_device_bytes(), c0);
}
