// For the GPU trainers' tests against the CPU step (tests/models/test_train_*_gpu.cu): the device's
// TrainOptions, and each parameter of the GPU model against the CPU model's, gradients or values, by
// the relative L2 error of the tensor (sums with cancellation: single elements carry more rounding).
#pragma once
#include <gtest/gtest.h>

#include "kernels/common/verify.h"
#include "models/model.h"
#include "models/trainer.h"

namespace gputest {

inline dlb::models::TrainOptions gpu() {
  dlb::models::TrainOptions o;
  o.device = "cuda:0";
  return o;
}

enum class Field { grad, value };
inline void expect_params_close(dlb::models::Model& got, dlb::models::Model& want, Field f, double tol) {
  const auto pg = got.params(), pw = want.params();
  ASSERT_EQ(pg.size(), pw.size());
  for (std::size_t i = 0; i < pw.size(); ++i) {
    dlb::L2Error e;
    if (f == Field::grad) e.add(pg[i]->grad.data(), pw[i]->grad.data(), pw[i]->size());
    else e.add(pg[i]->value.data(), pw[i]->value.data(), pw[i]->size());
    EXPECT_LT(e.rel(), tol) << pw[i]->name;
  }
}

}  // namespace gputest
