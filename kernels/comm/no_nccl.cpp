// Built without CUDA (or without NCCL): GPU collectives are unsupported.
#include "kernels/comm/comm.h"
#include "kernels/common/errors.h"

namespace dlb::comm {

bool nccl_available() { return false; }
std::string nccl_version() { return ""; }
std::unique_ptr<Collective> make_nccl_collective(Op, std::size_t, bool, int) {
  throw Unsupported("dlbench was built without CUDA/NCCL: no GPU collectives");
}

}  // namespace dlb::comm
