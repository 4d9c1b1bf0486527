// The gpt2 K/V-cache decoder on the CPU (models/gpt2_decode.h; the checks in gpt2_decode_check.h,
// shared with the GPU decoder's test).
#include "tests/models/gpt2_decode_check.h"

TEST(Gpt2Decode, CachedLogitsEqualTheFullForward) { gpt2_decode_check::cached_logits_equal_the_full_forward("cpu"); }

TEST(Gpt2Decode, BadUseIsRefused) { gpt2_decode_check::bad_use_is_refused("cpu"); }
