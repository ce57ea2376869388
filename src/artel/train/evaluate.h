// Evaluation on the validation split: mean cross-entropy over every target
// (weighted by rows, so a short last batch counts for what it holds) and, for
// classifiers, accuracy. Runs in eval mode with no graph and restores the
// model's training mode afterwards.
//
// Which rows: the dataset's validation batches in order (data/dataset.h) —
// MNIST all 2000 images, text the non-overlapping blocks of the split — the
// first `max_batches` of them, or all when max_batches is 0.
//
//   EvalResult r = evaluate(model, dataset, {.batch_size = 12});
//   r.val_loss;   // nats per target
#pragma once

#include <cstdint>
#include <optional>

#include "artel/comm/process_group.h"
#include "artel/data/dataset.h"
#include "artel/nn/model.h"

namespace artel::train {

struct EvalOptions {
  int64_t batch_size = 1;    // rows per forward, >= 1
  int64_t max_batches = 0;   // 0 = the whole split
  bool accuracy = false;     // also report the fraction of argmax == target
};

struct EvalResult {
  double val_loss = 0;
  std::optional<double> val_accuracy;
  int64_t targets = 0;       // how many targets the mean is over
};

EvalResult evaluate(nn::Model& model, const data::Dataset& ds, const EvalOptions& opts);

// What a result is made of: sums that workers evaluating some of the batches
// each add up (one all-reduce) before dividing.
struct EvalSums {
  double loss = 0;     // loss · targets, over the batches
  double targets = 0;
  double correct = 0;  // with accuracy
};

// evaluate()'s sums over its batches first, first + stride, … only (data
// parallelism: replica r of n takes r, r + n, …). `lockstep`: every replica
// runs the same number of forwards, ⌈batches / stride⌉, the ones past its
// last batch on batch 0 and left out of the sums — for a model whose forward
// is a collective (ZeRO-3 gathers its weights in each).
EvalSums evaluate_sums(nn::Model& model, const data::Dataset& ds, const EvalOptions& opts, int64_t first = 0,
                       int64_t stride = 1, bool lockstep = false);

// Every rank's sums added up, on every rank of `group` (one all-reduce).
EvalSums sum_over(comm::ProcessGroup& group, const EvalSums& mine);

// The result of sums over every batch; throws naming the split when it held no target.
EvalResult eval_result(const EvalSums& sums, const data::Dataset& ds, bool accuracy);

// Throws naming both when `logits` (…, V) have fewer columns than the data
// has classes: cross-entropy would name only a target "outside [0, V)", and
// only once such a target came, so a model that can never predict the other
// classes trained on without a word until then.
void check_logits_cover(const Tensor& logits, int64_t classes);

// Targets whose largest logit is the target: logits (N, C), targets (N) int64.
int64_t count_correct(const Tensor& logits, const Tensor& targets);

}  // namespace artel::train
