// PCIe ceilings (pcie.h).
#include "kernels/common/pcie.h"

#include <cstdio>

namespace dlb {

double pcie_gb_per_s(double gt_per_s, int lanes) {
  if (!(gt_per_s > 0) || lanes <= 0) return 0;
  const double code = gt_per_s <= 5.0 ? 8.0 / 10.0 : gt_per_s <= 32.0 ? 128.0 / 130.0 : 242.0 / 256.0;
  return gt_per_s * lanes * code / 8.0;
}

double pcie_gen3_x8_gb_per_s() { return pcie_gb_per_s(8.0, 8); }

std::string pcie_ceiling_doubt(double link_gb_per_s, double measured_gb_per_s) {
  char buf[160];
  if (link_gb_per_s < pcie_gen3_x8_gb_per_s() * (1 - 1e-9)) {
    std::snprintf(buf, sizeof buf, "link reads %.2f GB/s, below Gen3 x8 (%.2f): not the physical link", link_gb_per_s,
                  pcie_gen3_x8_gb_per_s());
    return buf;
  }
  if (measured_gb_per_s > link_gb_per_s) {
    std::snprintf(buf, sizeof buf, "a copy measured %.2f GB/s, above the link's %.2f: not the physical link",
                  measured_gb_per_s, link_gb_per_s);
    return buf;
  }
  return "";
}

}  // namespace dlb
