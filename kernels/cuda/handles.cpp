// Library handles (see handles.h).
#include "kernels/cuda/handles.h"

#include <map>
#include <stdexcept>

#include "kernels/common/errors.h"
#include "kernels/cuda/cuda_util.h"

namespace dlb::cuda {

void throw_cublas_error(cublasStatus_t s, const char* expr, const char* file, int line) {
  if (s == CUBLAS_STATUS_ALLOC_FAILED) throw OutOfMemory(std::string("cuBLAS: ") + expr);
  throw std::runtime_error(std::string("cuBLAS error ") + cublasGetStatusName(s) + " in " + expr + " at " + file +
                           ":" + std::to_string(line));
}

void throw_cudnn_error(cudnnStatus_t s, const char* expr, const char* file, int line) {
  if (s == CUDNN_STATUS_ALLOC_FAILED) throw OutOfMemory(std::string("cuDNN: ") + expr);
  throw std::runtime_error(std::string("cuDNN error ") + cudnnGetErrorString(s) + " in " + expr + " at " + file +
                           ":" + std::to_string(line));
}

namespace {
int current_device() {
  int d = 0;
  DLB_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

template <class H, class Create, class Destroy>
H per_device(std::map<int, H>& m, Create create, Destroy destroy) {
  struct Holder {
    std::map<int, H>* m;
    Destroy destroy;
    ~Holder() {
      for (auto& [d, h] : *m) destroy(h);
    }
  };
  static thread_local Holder holder{&m, destroy};
  const int d = current_device();
  auto it = m.find(d);
  if (it != m.end()) return it->second;
  H h{};
  create(&h);
  m[d] = h;
  return h;
}
}  // namespace

// Callers go through cublas_handle_on(), which binds a stream and the math mode.
static cublasHandle_t cublas_handle() {
  static thread_local std::map<int, cublasHandle_t> m;
  return per_device(m, [](cublasHandle_t* h) { DLB_CUBLAS_CHECK(cublasCreate(h)); },
                    [](cublasHandle_t h) { cublasDestroy(h); });
}

cublasHandle_t cublas_handle_on(cudaStream_t stream) {
  cublasHandle_t h = cublas_handle();
  DLB_CUBLAS_CHECK(cublasSetStream(h, stream));
  DLB_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
  return h;
}

cublasLtHandle_t cublaslt_handle() {
  static thread_local std::map<int, cublasLtHandle_t> m;
  return per_device(m, [](cublasLtHandle_t* h) { DLB_CUBLAS_CHECK(cublasLtCreate(h)); },
                    [](cublasLtHandle_t h) { cublasLtDestroy(h); });
}

static cudnnHandle_t cudnn_handle() {
  static thread_local std::map<int, cudnnHandle_t> m;
  return per_device(m, [](cudnnHandle_t* h) { DLB_CUDNN_CHECK(cudnnCreate(h)); },
                    [](cudnnHandle_t h) { cudnnDestroy(h); });
}

cudnnHandle_t cudnn_handle_on(cudaStream_t stream) {
  cudnnHandle_t h = cudnn_handle();
  DLB_CUDNN_CHECK(cudnnSetStream(h, stream));
  return h;
}

}  // namespace dlb::cuda
