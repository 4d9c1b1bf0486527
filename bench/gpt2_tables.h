// Suite gpt2's derived keys and tables (bench/gpt2_tables.cpp), apart from its cases (bench/gpt2.cpp).
#pragma once
#include <ostream>
#include <vector>

#include "bench/case.h"  // json

namespace dlb::bench {

// tokens_per_s from the harness's gflops and the record's flops_per_token; mfu_pct = pct_of_peak;
// on ours' training entries speedup_vs_pytorch: ours' tokens/s over PyTorch eager's at the same point
// (device, dtype, config, batch, seq, ckpt), per repetition paired with the peer's of the same
// interleaved round and on the median, with speedup_vs_pytorch_range (bench/paired.h).
void gpt2_derive(std::vector<json>& entries);
// The training table (Device, Config, Impl, ... tokens/s, MFU, memory) and op=infer's latency table.
void gpt2_summarize(const std::vector<json>& records, std::ostream& out);

}  // namespace dlb::bench
