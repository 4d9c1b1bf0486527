// kernels/cuda/lazy_libs: every generated forwarding function finds its real symbol in the installed
// library (dlopen'd here even without a device), the sonames follow the headers, and without a device
// neither the fingerprint nor a shim call maps cuBLAS/cuDNN (issue 13). CUDA builds only.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>

#include "kernels/common/device.h"
#include "kernels/common/errors.h"

#ifdef DLB_HAVE_CUDA
#include <cublas_v2.h>
#include <cudnn.h>

#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/lazy_libs.h"

namespace {
using dlb::cuda::LazyLib;

bool mapped(const std::string& lib_prefix) {  // a file named lib_prefix* is mapped into this process
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find("/" + lib_prefix) != std::string::npos) return true;
  return false;
}
}  // namespace

TEST(LazyLibs, NoDeviceLoadsNothingAndSaysWhyInOneLine) {
  if (dlb::cuda::device_available()) GTEST_SKIP() << "a CUDA device exists: the libraries may load";
  const dlb::CudaInfo& info = dlb::cuda_info();  // the fingerprint's CUDA facts
  EXPECT_FALSE(info.available);
  EXPECT_EQ(info.cublas_version, CUBLAS_VER_MAJOR * 10000 + CUBLAS_VER_MINOR * 100 + CUBLAS_VER_PATCH);
  EXPECT_EQ(info.cudnn_version, CUDNN_VERSION);
  cublasHandle_t h = nullptr;
  try {
    cublasCreate(&h);
    ADD_FAILURE() << "cublasCreate without a device did not throw";
  } catch (const dlb::Unsupported& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no CUDA device"), std::string::npos) << what;
    EXPECT_NE(what.find("libcublas.so."), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  EXPECT_THROW(cudnnGetVersion(), dlb::Unsupported);
  for (LazyLib l : {LazyLib::cublas, LazyLib::cublaslt, LazyLib::cudnn, LazyLib::nccl, LazyLib::nvrtc})
    EXPECT_FALSE(dlb::cuda::lazy_lib_loaded(l)) << dlb::cuda::lazy_lib_soname(l);
  EXPECT_FALSE(mapped("libcublas"));
  EXPECT_FALSE(mapped("libcudnn"));
  EXPECT_FALSE(mapped("libnvrtc"));
  EXPECT_FALSE(mapped("libcudart.so"));
}

TEST(LazyLibs, SonamesFollowTheHeaders) {
  EXPECT_EQ(dlb::cuda::lazy_lib_soname(LazyLib::cublas), "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR));
  EXPECT_EQ(dlb::cuda::lazy_lib_soname(LazyLib::cublaslt), "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR));
  EXPECT_EQ(dlb::cuda::lazy_lib_soname(LazyLib::cudnn), "libcudnn.so." + std::to_string(CUDNN_MAJOR));
  EXPECT_EQ(dlb::cuda::lazy_lib_soname(LazyLib::nvrtc), "libnvrtc.so." + std::to_string(CUDART_VERSION / 1000));
}

TEST(LazyLibs, EveryShimResolvesItsSymbolFromTheRealLibrary) {
  const auto& syms = dlb::cuda::lazy_symbols();
  ASSERT_GE(syms.size(), 38u);  // cuBLAS 8 + cuBLASLt 2 + cuDNN 28, NCCL where nccl.h exists
  std::set<std::string> names;
  for (const auto& s : syms) {
    EXPECT_TRUE(names.insert(s.name).second) << s.name << " listed twice";
    EXPECT_EQ(dlb::cuda::lazy_probe_symbol(s.lib, s.name), "") << s.name;
  }
  EXPECT_TRUE(names.count("cublasCreate_v2") && names.count("cudnnConvolutionForward") && names.count("cublasLtCreate"));
  EXPECT_TRUE(names.count("cudnnBackendExecute"));  // cudnn-frontend's graphs (attention impl cudnn)
  EXPECT_TRUE(dlb::cuda::lazy_lib_loaded(LazyLib::cublas));
  EXPECT_TRUE(mapped("libcublas.so."));
}

TEST(LazyLibs, AMissingSymbolIsNamedInOneLine) {
  const std::string why = dlb::cuda::lazy_probe_symbol(LazyLib::cudnn, "cudnnNoSuchFunction");
  EXPECT_NE(why.find("libcudnn.so."), std::string::npos) << why;
  EXPECT_NE(why.find("cudnnNoSuchFunction"), std::string::npos) << why;
  EXPECT_EQ(why.find('\n'), std::string::npos) << why;
}

#else
TEST(LazyLibs, CpuOnlyBuild) { GTEST_SKIP() << "a CPU-only build links no GPU library"; }
#endif
