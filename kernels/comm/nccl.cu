// The NCCL backend: the four collectives on GPU buffers, one rank per GPU. The communicator is made
// once for the whole world: rank 0's ncclGetUniqueId is broadcast over MPI, then ncclCommInitRank
// (the nccl-tests bootstrap). Times come from CUDA events on the collective's stream.
// One rank ran on an H100 (2026-11-27: test_nccl_gpu); more ranks (one GPU each) have not run yet.
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "kernels/comm/comm.h"
#include "kernels/common/errors.h"
#include "kernels/cuda/cuda_util.h"

namespace dlb::comm {

namespace {
void cuda_check(cudaError_t e, const char* what) {
  if (e == cudaErrorMemoryAllocation) throw OutOfMemory(std::string(what) + ": " + cudaGetErrorString(e));
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
void nccl_check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw std::runtime_error(std::string(what) + ": " + ncclGetErrorString(r));
}

struct World {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int device = -1;
};

World& nccl_world(int device) {
  static World w;
  if (w.comm) {
    if (w.device != device) throw UsageError("NCCL communicator already made on GPU " + std::to_string(w.device));
    return w;
  }
  const WorldInfo& info = world();
  // Every rank must reach the id broadcast below, or the others wait there for ever: agree first.
  const cudaError_t set = cudaSetDevice(device);
  if (info.size > 1 && sum_over_ranks(set == cudaSuccess ? 0 : 1) > 0)
    throw Unsupported("a rank could not select its GPU (one rank per GPU: local rank " + std::to_string(device) + ")");
  cuda_check(set, "cudaSetDevice");
  ncclUniqueId id{};
  if (info.rank == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  if (info.size > 1) broadcast_bytes(&id, sizeof id, 0);
  nccl_check(ncclCommInitRank(&w.comm, info.size, id, info.rank), "ncclCommInitRank");
  cuda_check(cudaStreamCreateWithFlags(&w.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  w.device = device;
  return w;
}

class NcclCollective : public Collective {
 public:
  NcclCollective(Op op, std::size_t count, bool inplace, int device)
      : w_(nccl_world(device)), op_(op), count_(count), inplace_(inplace) {
    const int n = world().size;
    if (count % std::size_t(n) && (op == Op::all_gather || op == Op::reduce_scatter))
      throw UsageError(std::string(op_name(op)) + " of " + std::to_string(count) + " elements: not a multiple of " + std::to_string(n) + " ranks");
    per_ = count / std::size_t(n);
    a_ = cuda::DeviceBuffer<float>(count);
    if (!inplace) b_ = cuda::DeviceBuffer<float>(count);
  }
  void load(const std::vector<float>& in) override {
    const std::size_t at = inplace_ && op_ == Op::all_gather ? per_ * std::size_t(world().rank) : 0;
    // On the collectives' own stream: w_.stream is non-blocking, so a plain cudaMemcpy (legacy
    // stream; from pageable memory it may return before its DMA lands) is not ordered before them.
    // On an H100 that race left 27167 of 1M reduce_scatter inputs stale (2026-11-27).
    cuda_check(cudaMemcpyAsync(a_.data() + at, in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice, w_.stream),
               "cudaMemcpyAsync");
    cuda_check(cudaStreamSynchronize(w_.stream), "cudaStreamSynchronize");
  }
  double run(int iters) override {
    cuda_check(cudaEventRecord(e0_, w_.stream), "cudaEventRecord");
    for (int i = 0; i < iters; ++i) once();
    cuda_check(cudaEventRecord(e1_, w_.stream), "cudaEventRecord");
    return cuda::elapsed_seconds(e0_, e1_);
  }
  std::vector<float> output() override {
    const std::size_t n = output_count(op_, count_, world().size);
    std::vector<float> out(n);
    // NCCL's in-place reduce-scatter leaves this rank's part at offset rank * count/ranks.
    const float* src = inplace_ ? a_.data() + (op_ == Op::reduce_scatter ? per_ * std::size_t(world().rank) : 0) : b_.data();
    cuda_check(cudaMemcpyAsync(out.data(), src, n * sizeof(float), cudaMemcpyDeviceToHost, w_.stream), "cudaMemcpyAsync");
    cuda_check(cudaStreamSynchronize(w_.stream), "cudaStreamSynchronize");  // after the collectives, as above
    return out;
  }

 private:
  void once() {
    const int rank = world().rank;
    float* a = a_.data();
    float* out = inplace_ ? a : b_.data();
    switch (op_) {
      case Op::all_reduce:
        nccl_check(ncclAllReduce(a, out, count_, ncclFloat32, ncclSum, w_.comm, w_.stream), "ncclAllReduce");
        break;
      case Op::all_gather:
        nccl_check(ncclAllGather(inplace_ ? a + per_ * std::size_t(rank) : a, out, per_, ncclFloat32, w_.comm, w_.stream), "ncclAllGather");
        break;
      case Op::reduce_scatter:
        nccl_check(ncclReduceScatter(a, inplace_ ? a + per_ * std::size_t(rank) : out, per_, ncclFloat32, ncclSum, w_.comm, w_.stream),
                   "ncclReduceScatter");
        break;
      case Op::broadcast:
        nccl_check(ncclBroadcast(a, out, count_, ncclFloat32, 0, w_.comm, w_.stream), "ncclBroadcast");
        break;
    }
  }
  World& w_;
  Op op_;
  std::size_t count_, per_ = 0;
  bool inplace_;
  cuda::DeviceBuffer<float> a_, b_;
  cuda::Event e0_, e1_;  // made after w_ selected the rank's device
};
}  // namespace

bool nccl_available() { return true; }

std::string nccl_version() {
  auto fmt = [](int x) {
    // NCCL_VERSION_CODE since 2.9: major*10000 + minor*100 + patch
    return std::to_string(x / 10000) + "." + std::to_string(x / 100 % 100) + "." + std::to_string(x % 100);
  };
  // Without a device the library is not loaded (kernels/cuda/lazy_libs.h): the header's version only.
  if (!dlb::cuda::device_available()) return "header " + fmt(NCCL_VERSION_CODE) + " (library not loaded: no CUDA device)";
  int v = 0;
  try {
    ncclGetVersion(&v);
  } catch (const Unsupported& e) {
    return "header " + fmt(NCCL_VERSION_CODE) + " (" + e.what() + ")";
  }
  return fmt(v) + " (header " + fmt(NCCL_VERSION_CODE) + ")";
}

std::unique_ptr<Collective> make_nccl_collective(Op op, std::size_t count, bool inplace, int device) {
  return std::make_unique<NcclCollective>(op, count, inplace, device);
}

}  // namespace dlb::comm
