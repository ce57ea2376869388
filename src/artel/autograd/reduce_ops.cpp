// sum and mean, of everything (a scalar of shape {}) or along one dimension.
#include "artel/autograd/op_helpers.h"
#include "artel/autograd/op_span.h"
#include "artel/autograd/ops.h"
#include "artel/kernels/reduce.h"

namespace artel::autograd {
namespace {

Variable reduce_all(const Variable& x, bool mean, const char* name) {
  const OpSpan span(name);
  int64_t n = x.numel();
  float scale = mean ? 1.0f / static_cast<float>(n) : 1.0f;
  double s = kernels::sum_all(n, x.value().data<float>());
  Tensor y = Tensor::full({}, static_cast<float>(s * (mean ? 1.0 / static_cast<double>(n) : 1.0)));
  Shape shape = x.shape();
  return make_result(y, {x}, name, [shape, scale](const Tensor& g, std::vector<Tensor>& gi) {
    gi[0] = Tensor::full(shape, g.item() * scale);
  });
}

Variable reduce_dim(const Variable& x, int64_t dim, bool keepdim, bool mean, const char* name) {
  const OpSpan span(name);
  int64_t d = detail::wrap_dim(dim, x.shape(), name);
  detail::DimSplit s = detail::split_at(x.shape(), d);
  float scale = mean ? 1.0f / static_cast<float>(s.n) : 1.0f;
  Shape out = x.shape();
  if (keepdim) out[static_cast<size_t>(d)] = 1;
  else out.erase(out.begin() + d);
  Tensor y = Tensor::empty(out);
  kernels::sum_dim(s.outer, s.n, s.inner, x.value().data<float>(), y.data<float>(), scale);
  Shape shape = x.shape();
  return make_result(y, {x}, name, [shape, s, scale](const Tensor& g, std::vector<Tensor>& gi) {
    gi[0] = Tensor::empty(shape);
    kernels::expand_dim(s.outer, s.n, s.inner, g.data<float>(), gi[0].data<float>(), scale);
  });
}

}  // namespace

Variable sum(const Variable& x) { return reduce_all(x, false, "sum"); }
Variable mean(const Variable& x) { return reduce_all(x, true, "mean"); }
Variable sum(const Variable& x, int64_t dim, bool keepdim) { return reduce_dim(x, dim, keepdim, false, "sum"); }
Variable mean(const Variable& x, int64_t dim, bool keepdim) { return reduce_dim(x, dim, keepdim, true, "mean"); }

}  // namespace artel::autograd
