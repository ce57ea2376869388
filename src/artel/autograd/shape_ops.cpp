// reshape and flatten (views: no copy), transpose, slice and concat (copies).
#include "artel/autograd/op_helpers.h"
#include "artel/autograd/op_span.h"
#include "artel/autograd/ops.h"
#include "artel/kernels/layout.h"

namespace artel::autograd {

Variable reshape(const Variable& x, const Shape& shape) {
  const OpSpan span("reshape");
  Tensor y;
  try {
    y = x.value().view(shape);
  } catch (const Error& e) {
    throw Error(std::string("reshape: ") + e.what(), "the new shape must hold the same number of elements");
  }
  Shape in = x.shape();
  return make_result(y, {x}, "reshape", [in](const Tensor& g, std::vector<Tensor>& gi) { gi[0] = g.view(in); });
}

Variable flatten(const Variable& x, int64_t start_dim) {
  const Shape& s = x.shape();
  if (s.empty()) return reshape(x, {1});
  int64_t d = detail::wrap_dim(start_dim, s, "flatten");
  Shape out(s.begin(), s.begin() + d);
  detail::DimSplit rest = detail::split_at(s, d);
  out.push_back(rest.n * rest.inner);
  return reshape(x, out);
}

Variable transpose(const Variable& x, int64_t dim0, int64_t dim1) {
  const OpSpan span("transpose");
  int64_t a = detail::wrap_dim(dim0, x.shape(), "transpose"), b = detail::wrap_dim(dim1, x.shape(), "transpose");
  if (a > b) std::swap(a, b);
  Shape out = x.shape();
  std::swap(out[static_cast<size_t>(a)], out[static_cast<size_t>(b)]);
  // x as (outer, A, mid, B, inner).
  int64_t outer = detail::split_at(x.shape(), a).outer, inner = detail::split_at(x.shape(), b).inner;
  int64_t A = x.size(a), B = x.size(b), mid = 1;
  for (int64_t i = a + 1; i < b; ++i) mid *= x.size(i);
  Tensor y = Tensor::empty(out);
  if (a == b) y.copy_from(x.value());
  else kernels::transpose(outer, A, mid, B, inner, x.value().data<float>(), y.data<float>());
  Shape in = x.shape();
  bool same = a == b;
  return make_result(y, {x}, "transpose", [in, outer, A, mid, B, inner, same](const Tensor& g, std::vector<Tensor>& gi) {
    if (same) {
      gi[0] = g;
      return;
    }
    gi[0] = Tensor::empty(in);
    kernels::transpose(outer, B, mid, A, inner, g.data<float>(), gi[0].data<float>());
  });
}

Variable slice(const Variable& x, int64_t dim, int64_t start, int64_t end) {
  const OpSpan span("slice");
  int64_t d = detail::wrap_dim(dim, x.shape(), "slice");
  detail::DimSplit s = detail::split_at(x.shape(), d);
  if (start < 0) start += s.n;
  if (end < 0) end += s.n;
  ARTEL_CHECK(0 <= start && start <= end && end <= s.n, "slice: [", start, ", ", end, ") out of range for dimension ",
              d, " of shape ", shape_str(x.shape()), " (hint: need 0 <= start <= end <= ", s.n, ")");
  Shape out = x.shape();
  out[static_cast<size_t>(d)] = end - start;
  Tensor y = Tensor::empty(out);
  int64_t len = (end - start) * s.inner, stride = s.n * s.inner, offset = start * s.inner;
  kernels::strided_copy(s.outer, len, x.value().data<float>() + offset, stride, y.data<float>(), len);
  Shape in = x.shape();
  return make_result(y, {x}, "slice", [in, s, len, stride, offset](const Tensor& g, std::vector<Tensor>& gi) {
    gi[0] = Tensor::zeros(in);
    kernels::strided_copy(s.outer, len, g.data<float>(), len, gi[0].data<float>() + offset, stride);
  });
}

Variable concat(const std::vector<Variable>& xs, int64_t dim) {
  const OpSpan span("concat");
  ARTEL_CHECK(!xs.empty(), "concat: no tensors to concatenate");
  const Shape& first = xs[0].shape();
  int64_t d = detail::wrap_dim(dim, first, "concat");
  Shape out = first;
  out[static_cast<size_t>(d)] = 0;
  for (const auto& x : xs) {
    ARTEL_CHECK(x.defined(), "concat: undefined tensor in the list");
    Shape s = x.shape();
    bool ok = s.size() == first.size();
    for (size_t i = 0; ok && i < s.size(); ++i) ok = static_cast<int64_t>(i) == d || s[i] == first[i];
    ARTEL_CHECK(ok, "concat: shape ", shape_str(s), " does not match ", shape_str(first), " outside dimension ", d);
    out[static_cast<size_t>(d)] += s[static_cast<size_t>(d)];
  }
  detail::DimSplit so = detail::split_at(out, d);
  int64_t row = so.n * so.inner;  // output elements per outer index
  Tensor y = Tensor::empty(out);
  std::vector<int64_t> offsets, lens;
  int64_t offset = 0;
  for (const auto& x : xs) {
    int64_t len = x.size(d) * so.inner;
    kernels::strided_copy(so.outer, len, x.value().data<float>(), len, y.data<float>() + offset, row);
    offsets.push_back(offset);
    lens.push_back(len);
    offset += len;
  }
  std::vector<Shape> shapes;
  std::vector<bool> wanted;
  for (const auto& x : xs) shapes.push_back(x.shape()), wanted.push_back(needs_grad(x));
  return make_result(y, xs, "concat", [shapes, wanted, offsets, lens, so, row](const Tensor& g, std::vector<Tensor>& gi) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      if (!wanted[i]) continue;
      gi[i] = Tensor::empty(shapes[i]);
      kernels::strided_copy(so.outer, lens[i], g.data<float>() + offsets[i], row, gi[i].data<float>(), lens[i]);
    }
  });
}

}  // namespace artel::autograd
