// Transfer-suite kernels (see transfer.h): the verification pattern in device memory, the overlap
// experiment's compute kernel, then their launchers, and the PCIe link ceiling from sysfs.
#include "kernels/cuda/transfer.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "kernels/common/pcie.h"
#include "kernels/cuda/cuda_util.h"

namespace dlb::cuda {

namespace {

constexpr float kOverlapA = 1.0f - 1.0f / 1024.0f;  // y <- y * a + b converges to 1 from [0, 1)
constexpr float kOverlapB = 1.0f / 1024.0f;

// One thread per 8-byte word (grid-stride); the last, partial word byte by byte.
__global__ void pattern_fill_kernel(unsigned char* p, std::size_t n, std::uint64_t seed) {
  const std::size_t words = n / 8;
  for (std::size_t j = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; j <= words; j += std::size_t(gridDim.x) * blockDim.x) {
    const std::uint64_t w = cpu::pattern_word(seed, j);
    if (j < words) {
      reinterpret_cast<std::uint64_t*>(p)[j] = w;
    } else {
      for (std::size_t b = 0; b < n % 8; ++b) p[8 * j + b] = static_cast<unsigned char>(w >> (8 * b));
    }
  }
}

__device__ int byte_diffs(std::uint64_t got, std::uint64_t want, std::size_t len, int* first_byte) {
  int d = 0;
  *first_byte = -1;
  for (std::size_t b = 0; b < len; ++b)
    if (((got >> (8 * b)) & 0xFF) != ((want >> (8 * b)) & 0xFF)) {
      if (*first_byte < 0) *first_byte = static_cast<int>(b);
      ++d;
    }
  return d;
}

// out[0] += differing bytes, out[1] = min(offset of a differing byte) (initialised to ~0).
__global__ void pattern_check_kernel(const unsigned char* p, std::size_t n, std::uint64_t seed,
                                     unsigned long long* out) {
  const std::size_t words = n / 8;
  unsigned long long diffs = 0, first = ~0ULL;
  for (std::size_t j = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; j <= words; j += std::size_t(gridDim.x) * blockDim.x) {
    const std::uint64_t want = cpu::pattern_word(seed, j);
    std::uint64_t got = 0;
    std::size_t len = 8;
    if (j < words) {
      got = reinterpret_cast<const std::uint64_t*>(p)[j];
    } else {
      len = n % 8;
      for (std::size_t b = 0; b < len; ++b) got |= std::uint64_t(p[8 * j + b]) << (8 * b);
    }
    if (len && got != want) {
      int fb = -1;
      const int d = byte_diffs(got, want, len, &fb);
      if (d) {
        diffs += d;
        first = min(first, static_cast<unsigned long long>(8 * j + fb));
      }
    }
  }
  if (diffs) {
    atomicAdd(&out[0], diffs);
    atomicMin(&out[1], first);
  }
}

// Grid-stride over the batch; each element runs a dependent FMA chain of `iters` (throughput-bound
// with enough threads in flight). Input bits are summed per warp, then one atomic per warp.
__global__ void overlap_compute_kernel(float* x, std::size_t n, int iters, unsigned long long* in_sum, float* samples,
                                       std::size_t sample_stride) {
  unsigned long long local = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
    const float v = x[i];
    local += __float_as_uint(v);
    float y = v;
    for (int it = 0; it < iters; ++it) y = __fmaf_rn(y, kOverlapA, kOverlapB);
    x[i] = y;  // written back so the chain cannot be dropped for unsampled elements
    if (samples && i % sample_stride == 0) samples[i / sample_stride] = y;
  }
  for (int off = 16; off > 0; off >>= 1) local += __shfl_down_sync(0xffffffffu, local, off);
  if ((threadIdx.x & 31) == 0 && local) atomicAdd(in_sum, local);
}

unsigned grid_for(std::size_t items, unsigned block) {
  // Enough blocks to fill any current GPU several times over; grid-stride loops do the rest.
  const std::size_t want = (items + block - 1) / block;
  return static_cast<unsigned>(std::clamp<std::size_t>(want, 1, 65535));
}

void check_aligned(const void* p, const char* who) {
  if (reinterpret_cast<std::uintptr_t>(p) % 8 != 0)
    throw std::invalid_argument(std::string(who) + ": device pointer must be 8-byte aligned");
}

}  // namespace

void pattern_fill(void* dst, std::size_t n, std::uint64_t seed, cudaStream_t s) {
  if (n == 0) return;
  check_aligned(dst, "pattern_fill");
  const unsigned block = 256;
  pattern_fill_kernel<<<grid_for(n / 8 + 1, block), block, 0, s>>>(static_cast<unsigned char*>(dst), n, seed);
  DLB_CUDA_CHECK(cudaGetLastError());
}

cpu::PatternCheck pattern_check(const void* p, std::size_t n, std::uint64_t seed, cudaStream_t s) {
  cpu::PatternCheck c;
  if (n == 0) return c;
  check_aligned(p, "pattern_check");
  DeviceBuffer<unsigned long long> out(2);
  const unsigned long long init[2] = {0, ~0ULL};
  DLB_CUDA_CHECK(cudaMemcpyAsync(out.data(), init, sizeof init, cudaMemcpyHostToDevice, s));
  const unsigned block = 256;
  pattern_check_kernel<<<grid_for(n / 8 + 1, block), block, 0, s>>>(static_cast<const unsigned char*>(p), n, seed,
                                                                     out.data());
  DLB_CUDA_CHECK(cudaGetLastError());
  unsigned long long res[2] = {0, 0};
  DLB_CUDA_CHECK(cudaMemcpyAsync(res, out.data(), sizeof res, cudaMemcpyDeviceToHost, s));
  DLB_CUDA_CHECK(cudaStreamSynchronize(s));
  c.mismatches = static_cast<std::size_t>(res[0]);
  c.first = c.mismatches ? static_cast<std::size_t>(res[1]) : 0;
  return c;
}

void overlap_compute(float* x, std::size_t n, int iters, unsigned long long* in_sum, float* samples,
                     std::size_t sample_stride, cudaStream_t s) {
  if (n == 0) return;
  if (sample_stride == 0) sample_stride = 1;
  const unsigned block = 256;
  overlap_compute_kernel<<<grid_for(n, block), block, 0, s>>>(x, n, iters, in_sum, samples, sample_stride);
  DLB_CUDA_CHECK(cudaGetLastError());
}

float overlap_compute_reference(float x, int iters) {
  float y = x;
  for (int it = 0; it < iters; ++it) y = std::fmaf(y, kOverlapA, kOverlapB);
  return y;
}

double pcie_link_gb_per_s(int device, std::string* desc) {
  char bus[32] = {0};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  std::string id(bus);
  for (auto& ch : id) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const std::string dir = "/sys/bus/pci/devices/" + id + "/";
  auto read = [&](const char* name) {
    std::ifstream f(dir + name);
    std::string line;
    std::getline(f, line);
    return line;
  };
  const double gts = std::strtod(read("max_link_speed").c_str(), nullptr);  // "32.0 GT/s PCIe" -> 32
  int width = std::atoi(read("current_link_width").c_str());
  if (width <= 0) width = std::atoi(read("max_link_width").c_str());
  if (!(gts > 0) || width <= 0) return 0;
  if (desc) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "PCIe %.1f GT/s x%d", gts, width);
    *desc = buf;
  }
  return pcie_gb_per_s(gts, width);
}

}  // namespace dlb::cuda
