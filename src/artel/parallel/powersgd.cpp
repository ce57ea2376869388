#include "artel/parallel/powersgd.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "artel/core/error.h"
#include "artel/core/rng.h"
#include "artel/kernels/gemm.h"
#include "artel/parallel/group_buffers.h"

namespace artel::parallel {

bool powersgd_compresses(int64_t rows, int64_t cols, int rank) {
  return cols > 1 && (rows + cols) * rank * 2 < rows * cols;
}

void orthonormalize_columns(float* a, int64_t rows, int64_t cols) {
  auto dot = [&](int64_t j, int64_t k) {
    double d = 0;
    for (int64_t i = 0; i < rows; ++i) d += static_cast<double>(a[i * cols + j]) * a[i * cols + k];
    return d;
  };
  std::vector<double> given(static_cast<size_t>(cols));
  for (int64_t j = 0; j < cols; ++j) given[static_cast<size_t>(j)] = std::sqrt(dot(j, j));
  for (int64_t j = 0; j < cols; ++j) {
    const double norm = std::sqrt(dot(j, j));
    // What is left of a column in the span of the earlier ones is rounding
    // noise: normalising it would add a direction the gradient does not have.
    const float scale = norm > 1e-4 * given[static_cast<size_t>(j)] && norm > 1e-30 ? static_cast<float>(1.0 / norm) : 0.0f;
    for (int64_t i = 0; i < rows; ++i) a[i * cols + j] *= scale;
    for (int64_t k = j + 1; k < cols; ++k) {
      const float d = static_cast<float>(dot(j, k));
      for (int64_t i = 0; i < rows; ++i) a[i * cols + k] -= d * a[i * cols + j];
    }
  }
}

PowerSgdBucket::PowerSgdBucket(std::vector<BucketMatrix> grads, comm::ProcessGroup& group, const PowerSgdOptions& opts)
    : group_(group), opts_(opts) {
  ARTEL_CHECK(opts_.rank >= 1, "PowerSGD's rank must be at least 1, got ", opts_.rank);
  int64_t first = 0, second = 0;
  for (const BucketMatrix& g : grads)
    if (!powersgd_compresses(g.rows, g.cols, opts_.rank)) plain_.push_back(g), first += g.rows * g.cols;
  for (const BucketMatrix& g : grads) {
    if (!powersgd_compresses(g.rows, g.cols, opts_.rank)) continue;
    compressed_.push_back({g, first, second, Tensor(), Tensor::zeros({g.rows, g.cols})});
    first += g.rows * opts_.rank;
    second += g.cols * opts_.rank;
  }
  if (compressed_.empty()) return;
  first_ = registered_or_plain(group_, first);
  second_ = registered_or_plain(group_, second);
  // Q lives in second_: the all-reduced Q of one step is the next step's warm start.
  for (size_t j = 0; j < compressed_.size(); ++j) {
    Compressed& c = compressed_[j];
    c.q = second_.slice0(c.q_offset, c.q_offset + c.m.cols * opts_.rank);
    Rng rng(opts_.seed, j);
    float* q = c.q.data<float>();
    for (int64_t i = 0; i < c.q.numel(); ++i) q[i] = rng.normal();
  }
}

std::vector<PowerSgdBucket::Kept> PowerSgdBucket::kept() const {
  std::vector<Kept> out;
  for (const Compressed& c : compressed_) out.push_back({c.m.offset, c.q.view({c.m.cols, opts_.rank}), c.error});
  return out;
}

comm::WorkPtr PowerSgdBucket::begin(float* bucket) {
  ARTEL_CHECK(compressing() && !compressed_.empty(), "PowerSGD bucket began before its start step or with nothing to compress");
  float* packed = first_.data<float>();
  int64_t at = 0;
  for (const BucketMatrix& g : plain_) {
    std::memcpy(packed + at, bucket + g.offset, static_cast<size_t>(g.rows * g.cols) * sizeof(float));
    at += g.rows * g.cols;
  }
  const int r = opts_.rank;
  for (Compressed& c : compressed_) {
    float* m = bucket + c.m.offset;
    const float* e = c.error.data<float>();
    for (int64_t i = 0; i < c.m.rows * c.m.cols; ++i) m[i] += e[i];
    // P (rows, r) = M (rows, cols) · Q (cols, r)
    kernels::gemm(false, false, c.m.rows, r, c.m.cols, 1.0f, m, c.q.data<float>(), 0.0f, packed + c.p_offset);
  }
  return group_.all_reduce(first_, {.op = comm::ReduceOp::avg, .algorithm = opts_.algorithm});
}

comm::WorkPtr PowerSgdBucket::middle(float* bucket) {
  const float* packed = first_.data<float>();
  int64_t at = 0;
  for (const BucketMatrix& g : plain_) {
    std::memcpy(bucket + g.offset, packed + at, static_cast<size_t>(g.rows * g.cols) * sizeof(float));
    at += g.rows * g.cols;
  }
  const int r = opts_.rank;
  for (Compressed& c : compressed_) {
    float* p = first_.data<float>() + c.p_offset;
    orthonormalize_columns(p, c.m.rows, r);
    // Q (cols, r) = Mᵀ (cols, rows) · P (rows, r)
    kernels::gemm(true, false, c.m.cols, r, c.m.rows, 1.0f, bucket + c.m.offset, p, 0.0f, c.q.data<float>());
  }
  return group_.all_reduce(second_, {.op = comm::ReduceOp::avg, .algorithm = opts_.algorithm});
}

void PowerSgdBucket::end(float* bucket) {
  const int r = opts_.rank;
  std::vector<float> approx;
  for (Compressed& c : compressed_) {
    float* m = bucket + c.m.offset;
    float* e = c.error.data<float>();
    const float* p = first_.data<float>() + c.p_offset;
    // P·Qᵀ a block of rows at a time, into a buffer the cache keeps, so that
    // one pass over M reads M_in and writes both e = M_in − P·Qᵀ and
    // M = P·Qᵀ (a copy, the product's write and a subtraction took three).
    const int64_t rows = std::max<int64_t>(1, kEndBlockBytes / (c.m.cols * static_cast<int64_t>(sizeof(float))));
    for (int64_t i = 0; i < c.m.rows; i += rows) {
      const int64_t block_rows = std::min(rows, c.m.rows - i), n = block_rows * c.m.cols;
      approx.resize(static_cast<size_t>(n));
      kernels::gemm(false, true, block_rows, c.m.cols, r, 1.0f, p + i * r, c.q.data<float>(), 0.0f, approx.data());
      float* mi = m + i * c.m.cols;
      float* ei = e + i * c.m.cols;
      for (int64_t j = 0; j < n; ++j) {
        ei[j] = mi[j] - approx[static_cast<size_t>(j)];
        mi[j] = approx[static_cast<size_t>(j)];
      }
    }
  }
  ++steps_;
}

}  // namespace artel::parallel
