// The napkin math of every op in one place: FLOPs and the bytes that must move between memory and
// the chip at least once (each operand read once, each result written once; caches assumed perfect),
// per timed iteration. Recorded as the keys `flops` and `bytes` so the report's roofline places a case
// at arithmetic intensity flops/bytes without recomputing anything. Element size from the record's
// dtype (fp32/tf32 4 bytes; fp16/bf16 2; storage of the inputs, fp32 results).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "kernels/cpu/conv2d/conv2d.h"
#include "models/net.h"

namespace dlb::bench::napkin {

struct Cost {
  double flops = 0, bytes = 0;
};

inline double elem_bytes(const std::string& dtype) { return dtype == "fp16" || dtype == "bf16" ? 2.0 : 4.0; }

// C[m,n] = A[m,k] B[k,n]: 2mnk FLOPs (FMA = 2); A and B read once, C (fp32) written once.
inline Cost gemm(double m, double n, double k, double esz) { return {2 * m * n * k, esz * (m * k + k * n) + 4 * m * n}; }

// One convolution pass (forward, backward-data or backward-filter: the same multiply-adds): the
// input, the filter and the output each move once.
inline Cost conv2d(const Conv2dShape& s, double esz) {
  return {s.flops(), esz * (double(s.x_size()) + double(s.w_size()) + double(s.y_size()))};
}

// One training step of `m` on n images in fp32: FLOPs from Model::train_flops; bytes = the
// batch read once, every layer output written in forward and read twice in backward (its own
// backward and the next layer's), its gradient written and read once, and per parameter: weight read
// twice (forward, backward-data), gradient written and read, SGD's momentum read and written, the
// weight written = 7 accesses of 4 bytes.
inline Cost train_step(const models::Model& m, int n) {
  Cost c;
  c.flops = m.train_flops(n);
  const auto shapes = m.value_shapes(n);
  double acts = 0;
  for (const auto& nd : m.nodes()) acts += double(shapes[std::size_t(nd.out)].size());
  c.bytes = 4.0 * (double(m.input_shape(n).size()) + 5.0 * acts + 7.0 * double(m.num_params()));
  return c;
}

// The record's keys: flops and bytes per timed iteration, scaled by `per_iteration` (e.g. steps per epoch).
inline void put(nlohmann::json& r, const Cost& c, double per_iteration = 1) {
  r["flops"] = c.flops * per_iteration;
  r["bytes"] = c.bytes * per_iteration;
}

}  // namespace dlb::bench::napkin
