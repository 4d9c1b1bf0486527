// What every backend shares: collective names, nccl-tests' busbw factors, per-rank element counts.
#include "kernels/comm/comm.h"

#include "kernels/common/errors.h"

namespace dlb::comm {

const char* op_name(Op op) {
  switch (op) {
    case Op::all_reduce: return "all_reduce";
    case Op::all_gather: return "all_gather";
    case Op::reduce_scatter: return "reduce_scatter";
    case Op::broadcast: return "broadcast";
  }
  return "?";
}

Op parse_op(const std::string& s) {
  for (Op op : {Op::all_reduce, Op::all_gather, Op::reduce_scatter, Op::broadcast})
    if (s == op_name(op)) return op;
  throw UsageError("collective '" + s + "': unknown (expected all_reduce, all_gather, reduce_scatter or broadcast)");
}

double busbw_factor(Op op, int ranks) {
  const double n = ranks;
  switch (op) {
    case Op::all_reduce: return 2.0 * (n - 1) / n;
    case Op::all_gather:
    case Op::reduce_scatter: return (n - 1) / n;
    case Op::broadcast: return 1.0;
  }
  return 1.0;
}

std::size_t input_count(Op op, std::size_t count, int ranks) {
  return op == Op::all_gather ? count / std::size_t(ranks) : count;
}

std::size_t output_count(Op op, std::size_t count, int ranks) {
  return op == Op::reduce_scatter ? count / std::size_t(ranks) : count;
}

}  // namespace dlb::comm
