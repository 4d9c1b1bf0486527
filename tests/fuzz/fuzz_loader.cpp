// libFuzzer target for the loader's readers of files it did not write: the first byte picks the
// pickle reader (CIFAR-10 python batches, models/loader/pickle.h), the PNG or the JPEG decoder
// (models/loader/codec.h, our setjmp glue around libpng and libjpeg-turbo); the rest is the file.
// The contract: a bad file throws InputError; anything else escaping (another exception, a crash, a
// sanitizer finding, a hang, unbounded memory) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/common/errors.h"
#include "models/loader/codec.h"
#include "models/loader/pickle.h"

using namespace dlb::models::loader;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t* p = data + 1;
  const std::size_t n = size - 1;
  try {
    switch (data[0] % 3) {
      case 0: {
        const Unpickled u = unpickle(std::string(reinterpret_cast<const char*>(p), n), "fuzz");
        if (!u.objs.empty()) (void)u.get(u.at(u.root), "data");
        break;
      }
      case 1: {
        DecodedImage d;
        png_decode(p, n, &d, (data[0] & 4) ? 32 : 0, (data[0] & 4) ? 32 : 0);
        break;
      }
      default: {
        DecodedImage d;
        jpeg_decode(p, n, &d, (data[0] & 4) ? 32 : 0, (data[0] & 4) ? 32 : 0);
        break;
      }
    }
  } catch (const dlb::InputError&) {
  }
  return 0;
}
