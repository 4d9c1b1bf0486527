// Shared helpers for device facts (see device.h).
#include "kernels/common/device.h"

namespace dlb {

std::string cuda_version_string(int v) {
  if (v <= 0) return "n/a";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

}  // namespace dlb
