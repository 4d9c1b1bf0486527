// PCIe link ceilings from what sysfs says (kernels/cuda/transfer.cu reads it), and whether such a
// reading can be the physical link. CPU-only arithmetic, so it is testable without a GPU.
#pragma once
#include <string>

namespace dlb {

// GB/s (1e9 B/s) per direction: signalling rate (GT/s per lane) x lanes x line-code efficiency
// (8b/10b up to 5 GT/s, 128b/130b for Gen3-5, FLIT 242/256 for Gen6); 0 when either is unknown.
double pcie_gb_per_s(double gt_per_s, int lanes);

// Gen3 x8, ~7.9 GB/s: the least a GPU's real host link offers.
double pcie_gen3_x8_gb_per_s();

// Why a link ceiling (GB/s per direction) cannot be the physical link, or "" when it can: below Gen3
// x8 (a VM's virtual bridge reads e.g. 2.5 GT/s x1) or below a copy measured over it (GB/s per
// direction; 0 when none yet). A doubted ceiling gives no pct_of_peak.
std::string pcie_ceiling_doubt(double link_gb_per_s, double measured_gb_per_s);

}  // namespace dlb
