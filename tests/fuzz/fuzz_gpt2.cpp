// libFuzzer target for llm.c's GPT-2 files (models/gpt2_files.h): the first byte picks the checkpoint
// or the token-file parser, the rest is the file. The contract: a bad file throws InputError naming
// the field; anything else escaping (another exception, a crash, a sanitizer finding, an allocation
// the bytes do not back) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/common/errors.h"
#include "models/gpt2_files.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::string file(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    if (data[0] % 2 == 0) {
      const auto w = dlb::models::parse_gpt2_checkpoint(file, "fuzz");
      (void)w.tensor(dlb::models::kLnfb)[0];
    } else {
      (void)dlb::models::parse_gpt2_tokens(file, "fuzz", data[0] >> 1);
    }
  } catch (const dlb::InputError&) {
  }
  return 0;
}
