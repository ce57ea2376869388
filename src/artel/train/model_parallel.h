// ModelParallel: what the training loop asks of a worker that holds only a
// shard of the model (tensor and pipeline parallelism, mesh_worker.h).
//
// Note [Model-parallel seams]
// The Trainer builds the model declared (shapes, no storage: Note [Declared
// parameters] in nn/module.h) and hands it to shard(), which applies the
// model's plan and materialises only this worker's part — drawn from the
// seed, or taken from --init — as the whole model would hold it. From then on
// the optimizer updates the shard, and the loop calls in here instead of
// running the model itself: forward_backward for a step (the pipeline
// schedule), clip_grad_norm (the global norm spans every shard), evaluate
// (through the pipeline), gather_into before weights are written (the
// reporter's whole model receives every shard, so final.safetensors has the
// single-worker names), and checkpoint / restore (the whole model's tensors
// and optimizer state under single-worker names, gathered on the reporter,
// each worker taking its part back on resume). Data parallelism across
// pipeline replicas is still WorkerHooks' (sync_gradients, mean_over_workers).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "artel/data/dataset.h"
#include "artel/models/model.h"
#include "artel/nn/module.h"
#include "artel/optim/optimizer.h"
#include "artel/train/checkpoint.h"
#include "artel/train/evaluate.h"

namespace artel::train {

class ModelParallel {
 public:
  virtual ~ModelParallel() = default;

  // Builds this worker's shard of the declared model (`data` gives inputs to
  // time pieces on); returns the shard's parameters (what the optimizer updates).
  virtual nn::NamedParameters shard(models::Model& model, const data::Dataset& data) = 0;
  // One step's forward and backward over this replica's batch; gradients
  // accumulate on the shard. Returns the step's loss where this worker
  // computes it (the last pipeline stage), else 0.
  virtual double forward_backward(const data::Batch& batch) = 0;
  // torch.nn.utils.clip_grad_norm_ over the whole model's gradients. Collective.
  virtual void clip_grad_norm(float max_norm) = 0;
  // Evaluation through the shards; every worker gets the result. Collective.
  virtual EvalResult evaluate(const data::Dataset& ds, const EvalOptions& opts) = 0;
  // Writes the whole model's weights (single-worker names) to `path` on the
  // reporter, gathering a bounded batch of tensors at a time, so no worker
  // ever holds the whole model. Collective.
  virtual void write_weights(const std::string& path, const std::map<std::string, std::string>& metadata) = 0;
  // Copies every shard into `full` on the reporter (allocating its parameters; null elsewhere). Collective.
  virtual void gather_into(models::Model* full) = 0;
  // The checkpoint after `step`, whole on the reporter (elsewhere: empty). Collective.
  virtual Checkpoint checkpoint(int64_t step, const optim::Optimizer& optimizer, const Compatibility& compat) = 0;
  // Takes this worker's part of a checkpoint; returns its step.
  virtual int64_t restore(const Checkpoint& ck, optim::Optimizer& optimizer) = 0;
  // {"dp", "pp", "tp", ...}: what a checkpoint must match (Compatibility::layout).
  virtual nlohmann::json layout() const = 0;
  // One line for the start of the run: "dp 1 x pp 2 x tp 2, 4 micro-batches, 1f1b".
  virtual std::string describe() const = 0;
};

}  // namespace artel::train
