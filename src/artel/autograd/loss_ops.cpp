// cross_entropy: fused log-softmax + NLL, mean over non-ignored targets.
#include "artel/autograd/op_helpers.h"
#include "artel/autograd/op_span.h"
#include "artel/autograd/ops.h"
#include "artel/kernels/cross_entropy.h"
#include "artel/kernels/elementwise.h"

namespace artel::autograd {

Variable cross_entropy(const Variable& logits, const Tensor& targets, int64_t ignore_index) {
  const OpSpan span("cross_entropy");
  ARTEL_CHECK(logits.value().dim() >= 1, "cross_entropy: logits must be (N, V), got ", shape_str(logits.shape()));
  int64_t V = logits.shape().back(), N = V ? logits.numel() / V : 0;
  ARTEL_CHECK(targets.defined() && targets.numel() == N, "cross_entropy: logits ", shape_str(logits.shape()),
              " need ", N, " targets, got shape ", shape_str(targets.defined() ? targets.shape() : Shape{}),
              " (hint: targets hold one class index per row of logits)");
  Tensor x = logits.value();
  Tensor lse = Tensor::empty({N});
  int64_t valid = 0;
  // Where the gradient will be taken, it is computed with the loss, in the
  // same pass over the logits (kernels::cross_entropy_with_gradient), and
  // backward only scales it; the logits are then not kept for backward.
  const bool with_gradient = grad_enabled() && needs_grad(logits);
  Tensor dlogits = with_gradient ? Tensor::empty(x.shape()) : Tensor();
  double total = detail::with_ids(targets, "cross_entropy", "targets", [&](const auto* t) {
    kernels::check_targets(N, V, t, ignore_index);
    if (with_gradient)
      return kernels::cross_entropy_with_gradient(N, V, x.data<float>(), t, ignore_index, lse.data<float>(), &valid,
                                                  dlogits.data<float>());
    return kernels::cross_entropy_forward(N, V, x.data<float>(), t, ignore_index, lse.data<float>(), &valid);
  });
  Tensor loss = Tensor::full({}, valid ? static_cast<float>(total / static_cast<double>(valid)) : 0.0f);
  if (!with_gradient) return Variable(loss, false);
  return make_result(loss, {logits}, "cross_entropy", [dlogits](const Tensor& g, std::vector<Tensor>& gi) {
    const float dloss = g.item();
    if (dloss == 1.0f) {  // the usual loss.backward(): the gradient as computed
      gi[0] = dlogits;
      return;
    }
    Tensor& out = grad_output_buffer(gi, 0, dlogits.shape());
    kernels::affine(dlogits.numel(), dlogits.data<float>(), dloss, 0.0f, out.data<float>());
  });
}

}  // namespace artel::autograd
