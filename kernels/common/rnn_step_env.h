// DLB_RNN_STEP, the GPU RNN/LSTM's per-step path (kernels/cuda/seq/rnn.h): unset, empty or "cublas"
// -> false (cuBLAS's recurrent GEMM + our cell kernel), "fused" -> true (one kernel a step); another
// value is bad usage. Read here, without CUDA, so the CLI refuses a bad value in every build before
// anything runs (harness/cli.cpp), and rnn.cu takes its choice from the same words.
#pragma once
#include <cstdlib>
#include <string>

#include "kernels/common/errors.h"

namespace dlb {

inline bool rnn_step_fused_from_env() {
  const char* v = std::getenv("DLB_RNN_STEP");
  const std::string e = v ? v : "";
  if (e.empty() || e == "cublas") return false;
  if (e == "fused") return true;
  throw UsageError("DLB_RNN_STEP=" + e + ": expected cublas or fused");
}

}  // namespace dlb
