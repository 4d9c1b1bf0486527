// For the gpu-labelled tests (tests/test_*_gpu.cu): the first line of every test that needs a CUDA
// device. Without one the test reports SKIPPED with the driver's reason, never passed.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "kernels/cuda/cuda_util.h"

#define SKIP_WITHOUT_GPU()                                                                        \
  do {                                                                                            \
    std::string dlb_why_;                                                                         \
    if (!dlb::cuda::device_available(&dlb_why_)) GTEST_SKIP() << "no CUDA device: " << dlb_why_; \
  } while (0)
