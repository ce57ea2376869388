// The tensor-parallel ops: each forward next to its backward, the
// communication through the group's Work handles, waited at once (the next op
// needs the result).
#include "artel/parallel/tensor_parallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "artel/autograd/op_span.h"
#include "artel/core/error.h"
#include "artel/core/threads.h"
#include "artel/kernels/cross_entropy.h"
#include "artel/kernels/fast_math.h"

namespace artel::parallel {
namespace {

using autograd::make_result;

// Rows per parallel_for chunk for row-wise work on rows of `width` floats.
int64_t grain_rows(int64_t width) { return std::max<int64_t>(1, (1 << 13) / std::max<int64_t>(1, width)); }

// Calls fn(const Id*) with the tensor's int32 or int64 data; throws for other dtypes.
template <class Fn>
decltype(auto) with_ids(const Tensor& ids, const char* op, const char* what, Fn&& fn) {
  if (ids.dtype() == DType::i64) return fn(ids.data<int64_t>());
  if (ids.dtype() == DType::i32) return fn(ids.data<int32_t>());
  throw Error(std::string(op) + ": " + what + " must be int64 or int32, got " + dtype_name(ids.dtype()),
              "store token ids and class indices as integers");
}

thread_local TensorParallelTraffic* t_traffic = nullptr;

}  // namespace

void TensorParallelTraffic::count(double bytes) {
  for (TensorParallelTraffic* c = t_traffic; c; c = c->outer_) c->bytes_ += bytes, ++c->collectives_;
}

TensorParallelTraffic::TensorParallelTraffic() : outer_(t_traffic) { t_traffic = this; }
TensorParallelTraffic::~TensorParallelTraffic() { t_traffic = outer_; }

namespace {

// The group's sum of `in` into `out`, counted.
void all_reduce_counted(comm::ProcessGroup& group, const Tensor& in, Tensor out) {
  TensorParallelTraffic::count(static_cast<double>(in.nbytes()));
  group.all_reduce(in, std::move(out))->wait();
}

// In place, counted; nothing to do alone or for an empty tensor (every rank has the same shape).
void all_reduce(comm::ProcessGroup& group, Tensor t, comm::ReduceOp op) {
  if (group.size() == 1 || t.numel() == 0) return;
  TensorParallelTraffic::count(static_cast<double>(t.nbytes()));
  group.all_reduce(std::move(t), {.op = op})->wait();
}

// After the all-reduce, hits[i] counts the shards that held index idx[i]:
// exactly one must have (positions whose index equals `skip` are not checked).
// The reduced counts are the same on every rank, so all ranks throw alike.
template <class Id>
void check_hits(const char* op, const char* what, int64_t n, const Id* idx, std::optional<int64_t> skip,
                const float* hits, int64_t vocab_start, int64_t rows, const comm::ProcessGroup& g) {
  for (int64_t i = 0; i < n; ++i) {
    auto v = static_cast<int64_t>(idx[i]);
    if (hits[i] == 1.0f || (skip && v == *skip)) continue;
    std::string allowed = skip ? " or ignore_index (" + std::to_string(*skip) + ")" : "";
    throw Error(std::string(op) + ": " + what + " " + std::to_string(v) + " at position " + std::to_string(i) +
                    " is held by " + std::to_string(static_cast<int64_t>(hits[i])) + " of the " +
                    std::to_string(g.size()) + " vocabulary shards of group '" + g.name() + "', expected 1",
                std::string(what) + "s must be in [0, V)" + allowed +
                    ", and the shards' [vocab_start, vocab_start + " + std::to_string(rows) +
                    ") must tile [0, V); rank " + std::to_string(g.rank()) + " holds [" +
                    std::to_string(vocab_start) + ", " + std::to_string(vocab_start + rows) + ")");
  }
}

}  // namespace

// ---- f and g

Variable copy_to_tensor_parallel(const Variable& x, comm::ProcessGroup& group) {
  const autograd::OpSpan span("copy_to_tensor_parallel");
  ARTEL_CHECK(x.defined(), "copy_to_tensor_parallel: undefined input");
  comm::ProcessGroup* pg = &group;  // must outlive the graph (Note [Tensor-parallel contract])
  return make_result(x.value(), {x}, "copy_to_tensor_parallel", [pg](const Tensor& g, std::vector<Tensor>& gi) {
    if (pg->size() == 1) {
      gi[0] = g;
      return;
    }
    gi[0] = Tensor::empty(g.shape());  // out of place: g may be shared with other inputs
    all_reduce_counted(*pg, g, gi[0]);
  });
}

Variable reduce_from_tensor_parallel(const Variable& x, comm::ProcessGroup& group) {
  const autograd::OpSpan span("reduce_from_tensor_parallel");
  ARTEL_CHECK(x.defined(), "reduce_from_tensor_parallel: undefined input");
  Tensor y = Tensor::empty(x.shape(), x.value().dtype());
  if (group.size() > 1) all_reduce_counted(group, x.value(), y);
  else y.copy_from(x.value());
  return make_result(y, {x}, "reduce_from_tensor_parallel",
                     [](const Tensor& g, std::vector<Tensor>& gi) { gi[0] = g; });
}

Variable once_over_tensor_parallel(const Variable& x, comm::ProcessGroup& group) {
  const autograd::OpSpan span("once_over_tensor_parallel");
  if (!x.defined() || group.rank() == 0) return x;
  return make_result(Tensor::zeros(x.shape()), {x}, "once_over_tensor_parallel",
                     [](const Tensor& g, std::vector<Tensor>& gi) { gi[0] = g; });
}

// ---- vocabulary-parallel cross-entropy

namespace {

// Per row of this shard's logits (N, Vl), given the global row max m:
// sums = [Σ exp(x − m) (N) | target logit (N) | 1 if this shard holds the target (N)].
// Ignored rows contribute zeros.
template <class Id>
void shard_row_sums(int64_t N, int64_t Vl, int64_t Vv, const float* x, const Id* t, int64_t start,
                    int64_t ignore_index, const float* m, float* sums) {
  float* sum_exp = sums;
  float* target_logit = sums + N;
  float* hit = sums + 2 * N;
  parallel_for(N, grain_rows(Vl), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      auto target = static_cast<int64_t>(t[r]);
      sum_exp[r] = target_logit[r] = hit[r] = 0.0f;
      if (target == ignore_index) continue;
      const float* row = x + r * Vl;
      sum_exp[r] = Vv > 0 ? kernels::row_sum_exp(Vv, row, m[r]) : 0.0f;
      int64_t local = target - start;
      if (local >= 0 && local < Vv) target_logit[r] = row[local], hit[r] = 1.0f;
    }
  });
}

// The forward's two all-reduces: the global row max (into row_max, N), then
// per row Σ exp(x − max), the target logit and the count of shards holding
// the target (into sums, 3N, as shard_row_sums). Returns Σ (log-sum-exp −
// target logit) over the valid rows and their count.
template <class Id>
double shard_cross_entropy_forward(int64_t N, int64_t Vl, int64_t Vv, const float* x, const Id* t, int64_t start,
                                   int64_t ignore_index, comm::ProcessGroup& group, Tensor& row_max, Tensor& sums,
                                   int64_t* valid) {
  float* m = row_max.data<float>();
  parallel_for(N, grain_rows(Vl), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) m[r] = Vv > 0 ? kernels::row_max(Vv, x + r * Vl) : -INFINITY;
  });
  all_reduce(group, row_max, comm::ReduceOp::max);
  float* s = sums.data<float>();
  shard_row_sums(N, Vl, Vv, x, t, start, ignore_index, m, s);
  all_reduce(group, sums, comm::ReduceOp::sum);
  check_hits("vocab_parallel_cross_entropy", "target", N, t, ignore_index, s + 2 * N, start, Vv, group);
  double total = 0;
  *valid = 0;
  for (int64_t r = 0; r < N; ++r) {
    if (static_cast<int64_t>(t[r]) == ignore_index) continue;
    const float lse = m[r] + std::log(s[r]);
    total += static_cast<double>(lse) - s[N + r];
    ++*valid;
  }
  return total;
}

}  // namespace

Variable vocab_parallel_cross_entropy(const Variable& local_logits, const Tensor& targets, int64_t vocab_start,
                                      comm::ProcessGroup& group, int64_t vocab, int64_t ignore_index) {
  const autograd::OpSpan span("vocab_parallel_cross_entropy");
  const char* op = "vocab_parallel_cross_entropy";
  ARTEL_CHECK(local_logits.defined() && local_logits.value().dim() >= 1 && local_logits.shape().back() > 0, op,
              ": local_logits must be (..., V/P) with V/P > 0, got ",
              local_logits.defined() ? shape_str(local_logits.shape()) : std::string("(undefined)"));
  int64_t Vl = local_logits.shape().back(), N = local_logits.numel() / Vl;
  ARTEL_CHECK(targets.defined() && targets.numel() == N, op, ": local_logits ", shape_str(local_logits.shape()),
              " need ", N, " targets, got shape ", targets.defined() ? shape_str(targets.shape()) : "(undefined)",
              " (hint: targets hold one class index per row of logits)");
  ARTEL_CHECK(vocab_start >= 0, op, ": vocab_start ", vocab_start,
              " is negative (hint: rank r of P holds columns [r·V/P, (r+1)·V/P))");
  // Columns from `vocab` on are padding (a table padded to divide over the group): never in the softmax.
  const int64_t Vv = vocab < 0 ? Vl : std::clamp<int64_t>(vocab - vocab_start, 0, Vl);
  Tensor x = local_logits.value();
  Tensor row_max = Tensor::empty({N});
  Tensor sums = Tensor::empty({3 * N});
  int64_t valid = 0;
  double total = with_ids(targets, op, "targets", [&](const auto* t) {
    return shard_cross_entropy_forward(N, Vl, Vv, x.data<float>(), t, vocab_start, ignore_index, group, row_max, sums,
                                       &valid);
  });
  Tensor loss = Tensor::full({}, valid ? static_cast<float>(total / static_cast<double>(valid)) : 0.0f);
  auto backward = [x, targets, row_max, sums, N, Vl, Vv, vocab_start, valid, ignore_index](
                      const Tensor& g, std::vector<Tensor>& gi) {
    gi[0] = Tensor::empty(x.shape());
    float scale = valid ? g.item() / static_cast<float>(valid) : 0.0f;
    with_ids(targets, "vocab_parallel_cross_entropy", "targets", [&](const auto* t) {
      kernels::cross_entropy_backward(N, Vl, x.data<float>(), t, ignore_index, row_max.data<float>(),
                                      sums.data<float>(), scale, gi[0].data<float>(), vocab_start);
    });
    if (Vv < Vl) {  // padding columns: no gradient, so padded rows stay zero
      float* d = gi[0].data<float>();
      for (int64_t r = 0; r < N; ++r) std::fill(d + r * Vl + Vv, d + (r + 1) * Vl, 0.0f);
    }
  };
  return make_result(loss, {local_logits}, op, backward);
}

}  // namespace artel::parallel
