// Device side of the transfer suite: the verification pattern written and checked in device memory
// (the same bytes as dlb::cpu::fill_pattern), the compute kernel the overlap experiment hides copies
// behind, and the PCIe link's ceiling read from sysfs. Implemented in transfer.cu.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/cpu/memcpy.h"

namespace dlb::cuda {

// dst[0..n) <- the pattern for `seed`, on device memory aligned to 8 bytes (cudaMalloc gives 256).
// Asynchronous on `s`.
void pattern_fill(void* dst, std::size_t n, std::uint64_t seed, cudaStream_t s = nullptr);
// Counts the bytes of device memory p[0..n) that differ from the pattern (every byte is read on the
// device; only two counters come back). Synchronizes `s`.
cpu::PatternCheck pattern_check(const void* p, std::size_t n, std::uint64_t seed, cudaStream_t s = nullptr);

// The overlap experiment's stand-in for a layer: x[i] <- f(x[i]) with f = `iters` dependent FMAs
// (y = y * a + b, a = 1 - 2^-10, b = 2^-10), in place on n floats. While reading, it adds the input
// floats' bit patterns into *in_sum (an integer sum: order-free, exact), which proves the kernel read
// the whole batch after its copy landed; every `sample_stride`-th output goes to samples[i / stride].
void overlap_compute(float* x, std::size_t n, int iters, unsigned long long* in_sum, float* samples,
                     std::size_t sample_stride, cudaStream_t s);
// f on the host, bit for bit the device's (fused multiply-add in both).
float overlap_compute_reference(float x, int iters);

// The host link's ceiling per direction in GB/s (1e9 B/s): signalling rate x lanes x line-code
// efficiency (dlb::pcie_gb_per_s, kernels/common/pcie.h), from sysfs
// max_link_speed and current_link_width of the GPU's PCI function. 0 when sysfs does not say
// (containers, non-PCIe links); `desc` receives e.g. "PCIe 32.0 GT/s x16".
double pcie_link_gb_per_s(int device, std::string* desc = nullptr);

}  // namespace dlb::cuda
