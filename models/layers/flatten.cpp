// Flatten (see flatten.h): a copy each way, fp32 and fp64.
#include "models/layers/flatten.h"

#include <algorithm>

namespace dlb::models {

void Flatten::forward(const Fwd<float>& a) { std::copy(a.x(), a.x() + a.in[0].size(), a.y); }
void Flatten::backward(const Bwd<float>& a) {
  if (a.dx()) std::copy(a.dy, a.dy + a.in[0].size(), a.dx());
}
void Flatten::forward_ref(const Fwd<double>& a) { std::copy(a.x(), a.x() + a.in[0].size(), a.y); }
void Flatten::backward_ref(const Bwd<double>& a) {
  if (a.dx()) std::copy(a.dy, a.dy + a.in[0].size(), a.dx());
}

}  // namespace dlb::models
