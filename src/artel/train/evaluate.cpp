#include "artel/train/evaluate.h"

#include <algorithm>

#include "artel/autograd/ops.h"
#include "artel/core/error.h"

namespace artel::train {

int64_t count_correct(const Tensor& logits, const Tensor& targets) {
  const int64_t n = targets.numel(), c = logits.numel() / std::max<int64_t>(1, n);
  ARTEL_CHECK(logits.numel() == n * c, "count_correct: logits ", shape_str(logits.shape()), " do not match ", n,
              " targets");
  const float* l = logits.data<float>();
  const int64_t* t = targets.data<int64_t>();
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = l + i * c;
    correct += (std::max_element(row, row + c) - row) == t[i];
  }
  return correct;
}

void check_logits_cover(const Tensor& logits, int64_t classes) {
  const int64_t columns = logits.dim() == 0 ? 0 : logits.size(-1);
  if (classes > 0 && columns < classes)
    throw Error(detail::concat("the model gives ", columns, " logits a row, but the data has ", classes, " classes"),
                "the model's last layer needs one output per class of the data");
}

EvalSums evaluate_sums(nn::Model& model, const data::Dataset& ds, const EvalOptions& opts, int64_t first,
                       int64_t stride, bool lockstep) {
  ARTEL_CHECK(opts.batch_size >= 1, "evaluation batch size must be >= 1, got ", opts.batch_size);
  ARTEL_CHECK(first >= 0 && first < stride, "evaluation batches from ", first, " every ", stride);
  nn::EvalMode eval_mode(model);
  autograd::NoGradGuard no_grad;
  int64_t batches = ds.num_val_batches(opts.batch_size);
  if (opts.max_batches > 0) batches = std::min(batches, opts.max_batches);
  const int64_t end = lockstep ? (batches + stride - 1) / stride * stride : batches;
  EvalSums s;
  for (int64_t i = first; i < end; i += stride) {
    if (i >= batches) {  // a forward to keep in step with the replicas that still have a batch
      model.forward(ds.val_batch(opts.batch_size, 0).x);
      continue;
    }
    data::Batch b = ds.val_batch(opts.batch_size, i);
    Tensor y = b.y.view({-1});
    autograd::Variable logits = model.forward(b.x);
    check_logits_cover(logits.value(), ds.num_classes());
    autograd::Variable loss = autograd::cross_entropy(logits, y);
    const auto n = static_cast<double>(y.numel());
    s.loss += static_cast<double>(loss.item()) * n;
    s.targets += n;
    if (opts.accuracy) s.correct += static_cast<double>(count_correct(logits.value(), y));
  }
  return s;
}

EvalSums sum_over(comm::ProcessGroup& group, const EvalSums& mine) {
  Tensor t = Tensor::empty({3}, DType::f64);
  double* d = t.data<double>();
  d[0] = mine.loss, d[1] = mine.targets, d[2] = mine.correct;
  group.all_reduce(t)->wait();
  return {.loss = d[0], .targets = d[1], .correct = d[2]};
}

EvalResult eval_result(const EvalSums& sums, const data::Dataset& ds, bool accuracy) {
  ARTEL_CHECK(sums.targets > 0, "the validation split of ", ds.describe(), " is empty");
  EvalResult r;
  r.val_loss = sums.loss / sums.targets;
  r.targets = static_cast<int64_t>(sums.targets);
  if (accuracy) r.val_accuracy = sums.correct / sums.targets;
  return r;
}

EvalResult evaluate(nn::Model& model, const data::Dataset& ds, const EvalOptions& opts) {
  return eval_result(evaluate_sums(model, ds, opts), ds, opts.accuracy);
}

}  // namespace artel::train
