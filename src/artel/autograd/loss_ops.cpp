// cross_entropy: fused log-softmax + NLL, mean over non-ignored targets.
#include "artel/autograd/op_helpers.h"
#include "artel/autograd/ops.h"
#include "artel/kernels/cross_entropy.h"

namespace artel::autograd {

Variable cross_entropy(const Variable& logits, const Tensor& targets, int64_t ignore_index) {
  ARTEL_CHECK(logits.value().dim() >= 1, "cross_entropy: logits must be (N, V), got ", shape_str(logits.shape()));
  int64_t V = logits.shape().back(), N = V ? logits.numel() / V : 0;
  ARTEL_CHECK(targets.defined() && targets.numel() == N, "cross_entropy: logits ", shape_str(logits.shape()),
              " need ", N, " targets, got shape ", shape_str(targets.defined() ? targets.shape() : Shape{}),
              " (hint: targets hold one class index per row of logits)");
  Tensor x = logits.value();
  Tensor lse = Tensor::empty({N});
  int64_t valid = 0;
  double total = detail::with_ids(targets, "cross_entropy", "targets", [&](const auto* t) {
    kernels::check_targets(N, V, t, ignore_index);
    return kernels::cross_entropy_forward(N, V, x.data<float>(), t, ignore_index, lse.data<float>(), &valid);
  });
  Tensor loss = Tensor::full({}, valid ? static_cast<float>(total / static_cast<double>(valid)) : 0.0f);
  return make_result(loss, {logits}, "cross_entropy",
                     [x, targets, lse, N, V, valid, ignore_index](const Tensor& g, std::vector<Tensor>& gi) {
                       gi[0] = Tensor::empty(x.shape());
                       float scale = valid ? g.item() / static_cast<float>(valid) : 0.0f;
                       detail::with_ids(targets, "cross_entropy", "targets", [&](const auto* t) {
                         kernels::cross_entropy_backward(N, V, x.data<float>(), t, ignore_index, lse.data<float>(),
                                                         scale, gi[0].data<float>());
                       });
                     });
}

}  // namespace artel::autograd
