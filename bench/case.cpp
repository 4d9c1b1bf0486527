// CaseId's results name and the device-string helpers (see case.h).
#include "bench/case.h"

namespace dlb::bench {

std::string CaseId::name() const {
  std::string n = suite + "/" + op + "/" + device + "/" + dtype;
  for (const auto& [k, v] : params) n += "/" + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
  return n;
}

bool is_gpu(const std::string& device) { return device.rfind("cuda", 0) == 0; }

int gpu_index(const std::string& device) {
  auto p = device.find(':');
  return p == std::string::npos ? 0 : std::stoi(device.substr(p + 1));
}

}  // namespace dlb::bench
