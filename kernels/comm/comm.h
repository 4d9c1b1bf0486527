// Collectives between the ranks of one run, on existing engines only: Open MPI for CPU buffers
// (mpi.cpp) and NCCL for GPU buffers (nccl.cu, one rank per GPU, its unique id shared over MPI as
// nccl-tests does). The harness starts the world (init) and ends it (finalize); bench/dist.cpp and the
// data-parallel step use the rest. Built without MPI, available() is false and every call but
// world()/available() throws dlb::Unsupported (no_mpi.cpp).
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace dlb::comm {

struct WorldInfo {
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;  // ranks on this host (decided by hostname, as MPI and NCCL do)
  std::vector<std::string> hosts;      // hosts[r] = hostname of rank r
};

bool available();       // built with MPI
bool initialized();     // init() ran and finalize() did not
void init();            // MPI_Init once (funneled threads); gathers the hostnames. Throws Unsupported without MPI.
void finalize();        // MPI_Finalize when init() ran; no-op otherwise
void abort(int code);   // ends every rank of the job (MPI_Abort) with this exit code
const WorldInfo& world();  // {0, 1, ...} before init()
std::string mpi_version();  // the library's own version line ("Open MPI v4.1.4, ...")

// ---- small helpers every rank calls together ----
void barrier();
void barrier_idle();  // a barrier whose waiting ranks sleep instead of spinning (1-rank baselines)
double max_over_ranks(double v);
long long sum_over_ranks(long long v);
void broadcast_bytes(void* buf, std::size_t bytes, int root);
// Every rank's `bytes` bytes, rank order: out.size() == bytes * size.
std::vector<char> allgather_bytes(const void* buf, std::size_t bytes);

// ---- the benchmarked collectives (fp32, sum) ----
enum class Op { all_reduce, all_gather, reduce_scatter, broadcast };
const char* op_name(Op op);
Op parse_op(const std::string& s);  // UsageError on an unknown name
// nccl-tests' figures: busbw = algbw x factor; all-reduce 2(n-1)/n, all-gather and reduce-scatter
// (n-1)/n, broadcast 1. The factor rescales to a flat ring's per-link traffic; on tree or NVLS
// algorithms busbw is a comparison figure, not a wire rate.
double busbw_factor(Op op, int ranks);

// `count` is nccl-tests' count: elements of the whole array (the all-reduce/broadcast buffer, the
// all-gather output, the reduce-scatter input). Per rank, all-gather sends and reduce-scatter receives
// count / ranks elements (count must be a multiple of ranks). In place means one buffer: all-gather's
// input sits at offset rank * count/ranks of its output, reduce-scatter's output inside its input.
std::size_t input_count(Op op, std::size_t count, int ranks);
std::size_t output_count(Op op, std::size_t count, int ranks);

class Collective {
 public:
  virtual ~Collective() = default;
  virtual void load(const std::vector<float>& input) = 0;  // input_count() values into the input
  virtual double run(int iters) = 0;                       // iters back-to-back collectives; seconds for all
  virtual std::vector<float> output() = 0;                 // output_count() values of the result
};
// CPU buffers through MPI (broadcast from rank 0). Throws Unsupported without MPI.
std::unique_ptr<Collective> make_mpi_collective(Op op, std::size_t count, bool inplace);
// GPU buffers on CUDA device `device` through NCCL (broadcast from rank 0); the NCCL communicator is
// made on first use for the whole world. Throws Unsupported when built without CUDA or NCCL.
std::unique_ptr<Collective> make_nccl_collective(Op op, std::size_t count, bool inplace, int device);
bool nccl_available();
std::string nccl_version();  // "2.28.3 (header 2.28.3)", or "" without NCCL

// ---- non-blocking all-reduce for the data-parallel step (SUM, in place, fp32) ----
class Pending {
 public:
  virtual ~Pending() = default;
  virtual bool test() = 0;  // drives progress; true when done
  virtual void wait() = 0;
};
std::unique_ptr<Pending> iallreduce_sum(float* buf, std::size_t count);

}  // namespace dlb::comm
