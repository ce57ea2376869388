#include "artel/nn/split.h"

#include <cstring>

#include "artel/core/error.h"

namespace artel::nn {

PartGeometry part_geometry(const Shape& whole, const Split& split, int part, int parts) {
  ARTEL_CHECK(parts >= 1 && part >= 0 && part < parts, "split: part ", part, " of ", parts);
  PartGeometry g;
  g.shape = whole;
  if (split.replicated()) {
    g.mid = g.count = shape_numel(whole);
    return g;
  }
  const int64_t d = split.dim;
  ARTEL_CHECK(d < static_cast<int64_t>(whole.size()), "split: dimension ", d, " of a tensor of shape ", shape_str(whole));
  ARTEL_CHECK(split.groups >= 1 && whole[d] % split.groups == 0, "split: dimension ", d, " of ", shape_str(whole),
              " does not hold ", split.groups, " equal sections");
  for (int64_t i = 0; i < d; ++i) g.outer *= whole[i];
  for (size_t i = d + 1; i < whole.size(); ++i) g.inner *= whole[i];
  g.outer *= split.groups;
  g.mid = whole[d] / split.groups;
  int64_t padded = g.mid;
  if (split.pad) padded = (g.mid + parts - 1) / parts * parts;
  if (padded % parts != 0)
    throw Error(detail::concat("split: dimension ", d, " of ", shape_str(whole), " (", g.mid,
                               split.groups > 1 ? " per section" : "", ") does not divide over ", parts, " ranks"),
                "choose a tensor-parallel degree that divides it");
  g.count = padded / parts;
  if (g.count % split.unit != 0)
    throw Error(detail::concat("split: dimension ", d, " of ", shape_str(whole), " gives each of ", parts, " ranks ",
                               g.count, " entries", split.groups > 1 ? " per section" : "",
                               ", which cuts a unit of ", split.unit),
                "choose a tensor-parallel degree that gives each rank whole units (heads)");
  g.begin = part * g.count;
  g.shape[d] = g.count * split.groups;
  return g;
}

Tensor take_part(const Tensor& whole, const Split& split, int part, int parts) {
  const PartGeometry g = part_geometry(whole.shape(), split, part, parts);
  Tensor out = Tensor::empty(g.shape, whole.dtype());
  const size_t e = dtype_size(whole.dtype());
  const size_t row = static_cast<size_t>(g.inner) * e;
  const auto* src = static_cast<const std::byte*>(whole.raw());
  auto* dst = static_cast<std::byte*>(out.raw());
  const int64_t valid = g.valid();
  for (int64_t o = 0; o < g.outer; ++o) {
    std::byte* to = dst + static_cast<size_t>(o * g.count) * row;
    std::memcpy(to, src + static_cast<size_t>(o * g.mid + g.begin) * row, static_cast<size_t>(valid) * row);
    std::memset(to + static_cast<size_t>(valid) * row, 0, static_cast<size_t>(g.count - valid) * row);
  }
  return out;
}

Tensor join_parts(const std::vector<Tensor>& parts, const Split& split, const Shape& whole) {
  ARTEL_CHECK(!parts.empty(), "join_parts: no parts");
  if (split.replicated()) return parts[0].clone();
  const int n = static_cast<int>(parts.size());
  Tensor out = Tensor::empty(whole, parts[0].dtype());
  const size_t e = dtype_size(out.dtype());
  auto* dst = static_cast<std::byte*>(out.raw());
  for (int p = 0; p < n; ++p) {
    const PartGeometry g = part_geometry(whole, split, p, n);
    ARTEL_CHECK(parts[p].shape() == g.shape && parts[p].dtype() == out.dtype(), "join_parts: part ", p, " is ",
                shape_str(parts[p].shape()), ", expected ", shape_str(g.shape), " of ", shape_str(whole));
    const size_t row = static_cast<size_t>(g.inner) * e;
    const auto* src = static_cast<const std::byte*>(parts[p].raw());
    for (int64_t o = 0; o < g.outer; ++o)
      std::memcpy(dst + static_cast<size_t>(o * g.mid + g.begin) * row, src + static_cast<size_t>(o * g.count) * row,
                  static_cast<size_t>(g.valid()) * row);
  }
  return out;
}

}  // namespace artel::nn
