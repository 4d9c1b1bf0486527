// Loader behind the generated lazy_libs.cpp: dlopen of the versioned sonames (majors from the headers),
// once per library and process, only where a CUDA device exists; errors are one line (dlb::Unsupported).
#include <cublas_api.h>
#include <cuda_runtime_api.h>  // CUDART_VERSION: NVRTC's major is the toolkit's
#include <cudnn_version.h>
#include <dlfcn.h>

#include <mutex>
#include <sstream>
#include <string>

#include "kernels/common/errors.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/lazy_libs.h"

#if __has_include(<nccl.h>)
#include <nccl.h>
#define DLB_NCCL_SONAME "libnccl.so." DLB_LAZY_STR(NCCL_MAJOR)
#else
#define DLB_NCCL_SONAME "libnccl.so.2"
#endif

#ifndef DLB_LAZY_LIB_DIRS  // where CMake found the libraries: tried after the loader's own search
#define DLB_LAZY_LIB_DIRS ""
#endif

namespace dlb::cuda {

namespace {
#define DLB_LAZY_STR2(x) #x
#define DLB_LAZY_STR(x) DLB_LAZY_STR2(x)

constexpr int kLibs = 5;
std::mutex g_mu;
void* g_handle[kLibs] = {};

// dlopen by soname (LD_LIBRARY_PATH, the binary's RUNPATH, ld.so.cache), then in the configured dirs.
void* open_lib(LazyLib lib, std::string* why) {
  const int i = static_cast<int>(lib);
  if (g_handle[i]) return g_handle[i];
  const std::string so = lazy_lib_soname(lib);
  void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string first_error = h ? "" : dlerror();
  std::istringstream dirs(DLB_LAZY_LIB_DIRS);
  for (std::string d; !h && std::getline(dirs, d, ':');)
    if (!d.empty()) h = dlopen((d + "/" + so).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) *why = "cannot load " + so + ": " + first_error;
  g_handle[i] = h;
  return h;
}

void* find(LazyLib lib, const char* name, std::string* why) {
  void* h = open_lib(lib, why);
  if (!h) return nullptr;
  dlerror();
  void* f = dlsym(h, name);
  if (!f) *why = std::string(lazy_lib_soname(lib)) + " has no " + name + ": " + dlerror();
  return f;
}
}  // namespace

const char* lazy_lib_soname(LazyLib lib) {
  switch (lib) {
    case LazyLib::cublas: return "libcublas.so." DLB_LAZY_STR(CUBLAS_VER_MAJOR);
    case LazyLib::cublaslt: return "libcublasLt.so." DLB_LAZY_STR(CUBLAS_VER_MAJOR);
    case LazyLib::cudnn: return "libcudnn.so." DLB_LAZY_STR(CUDNN_MAJOR);
    case LazyLib::nccl: return DLB_NCCL_SONAME;
    case LazyLib::nvrtc: {
      static const std::string so = "libnvrtc.so." + std::to_string(CUDART_VERSION / 1000);
      return so.c_str();
    }
  }
  return "?";
}

void* lazy_symbol(LazyLib lib, const char* name) {
  // No device, no GPU library: nothing that could use it may pay its address space (issue 13).
  static const std::string no_device = [] {
    std::string why;
    return device_available(&why) ? std::string() : why;
  }();
  if (!no_device.empty())
    throw Unsupported(std::string(lazy_lib_soname(lib)) + " not loaded for " + name + ": no CUDA device (" +
                      no_device + ")");
  std::lock_guard<std::mutex> lk(g_mu);
  std::string why;
  void* f = find(lib, name, &why);
  if (!f) throw Unsupported(why);
  return f;
}

bool lazy_lib_loaded(LazyLib lib) {
  std::lock_guard<std::mutex> lk(g_mu);
  return g_handle[static_cast<int>(lib)] != nullptr;
}

std::string lazy_probe_symbol(LazyLib lib, const char* name) {
  std::lock_guard<std::mutex> lk(g_mu);
  std::string why;
  return find(lib, name, &why) ? std::string() : why;
}

}  // namespace dlb::cuda
