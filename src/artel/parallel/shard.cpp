#include "artel/parallel/shard.h"

#include <cstring>
#include <string>

#include "artel/core/error.h"

namespace artel::parallel {
namespace {

// A 1-D or 2-D tensor seen as a (rows, cols) grid of elements.
struct Grid {
  int64_t rows, cols;
};

Grid grid_of(const Tensor& t) { return t.dim() == 1 ? Grid{1, t.size(0)} : Grid{t.size(0), t.size(1)}; }

void check_dim(const Tensor& t, int64_t dim, const char* fn) {
  ARTEL_CHECK(t.defined() && (t.dim() == 1 || t.dim() == 2), fn, ": expects a 1-D or 2-D tensor, got shape ",
              t.defined() ? shape_str(t.shape()) : std::string("(undefined)"));
  ARTEL_CHECK(dim >= 0 && dim < t.dim(), fn, ": dimension ", dim, " out of range for shape ", shape_str(t.shape()),
              " (hint: 0 splits rows, 1 splits columns of a 2-D tensor)");
}

}  // namespace

Tensor shard_of(const Tensor& full, int64_t dim, int part, int parts) {
  check_dim(full, dim, "shard_of");
  ARTEL_CHECK(parts >= 1 && part >= 0 && part < parts, "shard_of: part ", part, " of ", parts,
              " is out of range (hint: 0 <= part < parts)");
  int64_t n = full.size(dim);
  ARTEL_CHECK(n % parts == 0, "shard_of: dimension ", dim, " of shape ", shape_str(full.shape()), " (size ", n,
              ") is not divisible into ", parts, " parts (hint: choose a size that is a multiple of the group size)");
  Shape shape = full.shape();
  shape[static_cast<size_t>(dim)] = n / parts;
  Tensor out = Tensor::empty(shape, full.dtype());
  size_t esize = dtype_size(full.dtype());
  Grid g = grid_of(full);
  // Along the last dimension each row contributes one block; along dimension
  // 0 of a 2-D tensor the block is one contiguous run of rows.
  bool along_last = dim == full.dim() - 1;
  int64_t rows = along_last ? g.rows : 1;
  size_t run = along_last ? static_cast<size_t>(g.cols / parts) * esize : out.nbytes();
  size_t stride = along_last ? static_cast<size_t>(g.cols) * esize : 0;
  const auto* src = static_cast<const std::byte*>(full.raw()) + static_cast<size_t>(part) * run;
  auto* dst = static_cast<std::byte*>(out.raw());
  for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + static_cast<size_t>(r) * run, src + r * stride, run);
  return out;
}

Tensor unshard(const std::vector<Tensor>& parts, int64_t dim) {
  ARTEL_CHECK(!parts.empty(), "unshard: no parts given");
  const Tensor& first = parts.front();
  check_dim(first, dim, "unshard");
  for (size_t i = 1; i < parts.size(); ++i)
    ARTEL_CHECK(parts[i].defined() && parts[i].shape() == first.shape() && parts[i].dtype() == first.dtype(),
                "unshard: part ", i, " has shape ", parts[i].defined() ? shape_str(parts[i].shape()) : "(undefined)",
                " where part 0 has ", shape_str(first.shape()),
                " (hint: every part must have the same shape and dtype)");
  auto k = static_cast<int64_t>(parts.size());
  Shape shape = first.shape();
  shape[static_cast<size_t>(dim)] *= k;
  Tensor out = Tensor::empty(shape, first.dtype());
  size_t esize = dtype_size(first.dtype());
  Grid g = grid_of(first);
  bool along_last = dim == first.dim() - 1;
  int64_t rows = along_last ? g.rows : 1;
  size_t run = along_last ? static_cast<size_t>(g.cols) * esize : first.nbytes();
  size_t stride = along_last ? run * static_cast<size_t>(k) : 0;
  auto* dst = static_cast<std::byte*>(out.raw());
  for (int64_t p = 0; p < k; ++p) {
    const auto* src = static_cast<const std::byte*>(parts[static_cast<size_t>(p)].raw());
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(dst + r * stride + static_cast<size_t>(p) * run, src + static_cast<size_t>(r) * run, run);
  }
  return out;
}

}  // namespace artel::parallel
