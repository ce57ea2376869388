#include "artel/nn/dropout.h"

#include "artel/autograd/ops.h"
#include "artel/kernels/activation.h"

namespace artel::nn {

Dropout::Dropout(float p, std::shared_ptr<Rng> rng) : p_(p), rng_(std::move(rng)) {
  ARTEL_CHECK(p >= 0.0f && p < 1.0f, "Dropout: p must be in [0, 1), got ", p);
  ARTEL_CHECK(rng_ != nullptr, "Dropout: needs an Rng");
}

Variable Dropout::forward(const Variable& x) {
  if (p_ == 0.0f || !is_training()) return x;
  if (!split_.part) return autograd::dropout(x, p_, true, *rng_);
  Tensor mask = Tensor::empty(split_.whole(x.shape()));
  kernels::dropout_mask(mask.numel(), p_, *rng_, mask.data<float>());
  return autograd::dropout_with_mask(x, split_.part(mask));
}

}  // namespace artel::nn
