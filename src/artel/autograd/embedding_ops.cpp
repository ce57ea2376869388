// embedding (row gather; backward scatter-adds into a (V, C) gradient) and
// dropout (a mask drawn from the caller's Rng, reused by the backward).
#include "artel/autograd/op_helpers.h"
#include "artel/autograd/op_span.h"
#include "artel/autograd/ops.h"
#include "artel/kernels/activation.h"
#include "artel/kernels/embedding.h"

namespace artel::autograd {

Variable embedding(const Variable& weight, const Tensor& ids, EmbeddingRows rows) {
  const OpSpan span("embedding");
  ARTEL_CHECK(weight.value().dim() == 2, "embedding: weight must be (V, C), got ", shape_str(weight.shape()));
  ARTEL_CHECK(ids.defined(), "embedding: undefined ids");
  int64_t V = weight.size(0), C = weight.size(1), n = ids.numel();
  const int64_t first = rows.first_row, vocab = rows.vocab < 0 ? V : rows.vocab;
  ARTEL_CHECK(first >= 0 && (first < vocab || V == 0), "embedding: rows from ", first, " of a table of ", vocab);
  Shape out = ids.shape();
  out.push_back(C);
  Tensor y = Tensor::empty(out);
  Tensor w = weight.value();
  detail::with_ids(ids, "embedding", "ids", [&](const auto* p) {
    kernels::check_ids(n, vocab, p);
    kernels::embedding_forward(n, C, p, first, V, w.data<float>(), y.data<float>());
  });
  Variable out_v = make_result(y, {weight}, "embedding", [ids, n, V, C, first](const Tensor& g, std::vector<Tensor>& gi) {
    if (const RowGradientSink* sink = row_gradient_sink()) return (*sink)({ids, first, g});  // Note [Row gradients]
    // Rows scattered into the table's gradient so far when the engine offers
    // it (a table tied to the head), else into zeros.
    const bool onto = gi[0].defined();
    if (!onto) gi[0] = Tensor::empty({V, C});
    detail::with_ids(ids, "embedding", "ids", [&](const auto* p) {
      kernels::embedding_backward(n, V, C, p, first, g.data<float>(), gi[0].data<float>(), onto);
    });
  });
  if (out_v.grad_fn()) {
    out_v.grad_fn()->set_adds_into_gradients();
    out_v.grad_fn()->set_row_gradient_input(0);
  }
  return out_v;
}

Variable dropout(const Variable& x, float p, bool training, Rng& rng) {
  const OpSpan span("dropout");
  ARTEL_CHECK(p >= 0.0f && p <= 1.0f, "dropout: probability ", p, " outside [0, 1]");
  if (!training || p == 0.0f) return x;
  Tensor mask = Tensor::empty(x.shape());
  kernels::dropout_mask(x.numel(), p, rng, mask.data<float>());
  return dropout_with_mask(x, mask);
}

Variable dropout_with_mask(const Variable& x, const Tensor& mask) {
  const OpSpan span("dropout");
  ARTEL_CHECK(mask.shape() == x.shape() && mask.dtype() == DType::f32, "dropout: a mask of ", shape_str(mask.shape()),
              " for an input of ", shape_str(x.shape()));
  Tensor y = Tensor::empty(x.shape());
  kernels::multiply(x.numel(), x.value().data<float>(), mask.data<float>(), y.data<float>());
  return make_result(y, {x}, "dropout", [mask](const Tensor& g, std::vector<Tensor>& gi) {
    gi[0] = Tensor::empty(g.shape());
    kernels::multiply(g.numel(), g.data<float>(), mask.data<float>(), gi[0].data<float>());
  });
}

}  // namespace artel::autograd
