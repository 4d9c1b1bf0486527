// The gpt2 K/V-cache decoder on a GPU (models/cuda/gpu_gpt2_decode.cu) against the full CPU forward,
// with the CPU decoder's checks (gpt2_decode_check.h). Passed on an H100 (2026-11-27).
#include "tests/gpu_test.h"
#include "tests/models/gpt2_decode_check.h"

TEST(Gpt2DecodeGpu, CachedLogitsEqualTheFullForward) {
  SKIP_WITHOUT_GPU();
  gpt2_decode_check::cached_logits_equal_the_full_forward("cuda:0");
}

TEST(Gpt2DecodeGpu, BadUseIsRefused) {
  SKIP_WITHOUT_GPU();
  gpt2_decode_check::bad_use_is_refused("cuda:0");
}
