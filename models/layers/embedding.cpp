// Embedding (see embedding.h) over the gather / scatter-add kernels and their fp64 references.
#include "models/layers/embedding.h"

#include "kernels/common/errors.h"
#include "kernels/cpu/seq/embedding.h"

namespace dlb::models {

Embedding::Embedding(std::string name, int vocab, int dim) : vocab(vocab), dim(dim), w_(&own_) {
  if (vocab <= 0 || dim <= 0) throw UsageError(name + ": vocabulary and dimension must be positive");
  own_.name = name + ".weight";
  own_.resize({vocab, dim});
}

Embedding::Embedding(Embedding* owner) : vocab(owner->vocab), dim(owner->dim), w_(owner->w_), shared_(true) {}

std::unique_ptr<Layer> Embedding::clone() const {
  auto c = std::make_unique<Embedding>(*this);
  if (!shared_) c->w_ = &c->own_;  // a borrowed pointer is repointed by Model::clone
  return c;
}

Shape Embedding::out_shape(Shapes in) const {
  if (in[0].rank() >= Shape::kMaxRank)
    throw InputError(w_->name + ": token input of rank " + std::to_string(in[0].rank()));
  return in[0].appended(dim);  // [n, ...] -> [n, ..., dim]
}

void Embedding::init(std::uint64_t seed) {
  if (!shared_) fill_normal(own_.value.data(), own_.size(), 1.f, seed);
}

void Embedding::forward(const Fwd<float>& a) {
  cpu::seq::embedding_forward(a.ids(), a.in[0].n(), int(a.in[0].per_item()), w_->value.data(), vocab, dim, nullptr, a.y);
}
void Embedding::backward(const Bwd<float>& a) {
  cpu::seq::embedding_backward(a.ids(), a.in[0].n(), int(a.in[0].per_item()), a.dy, vocab, dim, w_->grad.data(), nullptr);
}
void Embedding::forward_ref(const Fwd<double>& a) {
  cpu::seq::embedding_forward_ref(a.ids(), a.in[0].n(), int(a.in[0].per_item()), w_->ref_value.data(), vocab, dim, nullptr, a.y);
}
void Embedding::backward_ref(const Bwd<double>& a) {
  cpu::seq::embedding_backward_ref(a.ids(), a.in[0].n(), int(a.in[0].per_item()), a.dy, vocab, dim, w_->ref_grad.data(), nullptr);
}

}  // namespace dlb::models
