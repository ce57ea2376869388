// Strategy: the one seam between the training loop (trainer.h) and how a run
// is parallelised, as Lightning's Strategy or DeepSpeed's engine is. The loop
// is written once — batch, forward and backward, sync, clip, step, evaluate,
// checkpoint, weights — and asks the strategy for each part that depends on
// where the model and the data live. This base class is a worker alone:
// the whole model, its own batches, nothing to synchronise.
//
//   Strategy                a worker alone (Trainer's default)
//   DataParallelStrategy    the whole model on every worker, gradients averaged by DDP (data_parallel.h)
//   ModelMesh               a shard of the model over a dp × pp × tp mesh (model_mesh.h)
//
// Note [Model-parallel seams]
// The Trainer declares the model (shapes, no storage: Note [Declared
// parameters] in nn/module.h) and hands it to build(): alone or data-parallel
// that materialises the whole model from the seed or --init; a mesh applies
// the model's plan and materialises only this worker's part, as the whole
// model would hold it. From then on the optimizer updates what build()
// returned, and every step, evaluation, checkpoint and weights file goes
// through the strategy, so no worker of a mesh ever holds the whole model.
// Files keep the single-worker names, so any layout's files compare.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>

#include "artel/comm/process_group.h"
#include "artel/data/dataset.h"
#include "artel/nn/model.h"
#include "artel/nn/module.h"
#include "artel/nn/safetensors.h"
#include "artel/optim/optimizer.h"
#include "artel/train/checkpoint.h"
#include "artel/train/evaluate.h"
#include "artel/train/memory_report.h"

namespace artel::train {

class Strategy {
 public:
  virtual ~Strategy() = default;

  // This worker's batches: those of data-parallel replica `replica()` of `replicas()`.
  virtual int64_t replica() const { return 0; }
  virtual int64_t replicas() const { return 1; }
  // The one worker of a run that prints and writes files.
  virtual bool reporter() const { return true; }
  // The model is split over the workers: evaluation, weights files and the
  // gathering of the whole model are collectives every worker joins.
  virtual bool sharded() const { return false; }
  // Gradients are synchronised (the metrics then split compute from sync).
  virtual bool synchronises() const { return false; }

  // Gives the declared `model` its weights on this worker — from `init`
  // (a safetensors file) when given, else drawn from `seed` — and returns what
  // the optimizer updates. `data` supplies inputs to time pieces on.
  virtual nn::NamedParameters build(nn::Model& model, const data::Dataset& data, uint64_t seed,
                                    const std::string& init);
  // The optimizer over build()'s parameters exists (a sharded step wraps it).
  virtual void attach(optim::Optimizer& optimizer) {}

  // One step's forward and backward over this worker's micro-batches, each
  // loss scaled by 1/K (Note [Micro-batches] in trainer.h); gradients
  // accumulate. Returns this worker's loss (0 where it computes none).
  virtual double forward_backward(std::span<const data::Batch> micro_batches);
  // After backward: waits for the gradients' synchronisation -> exposed seconds.
  virtual double sync_gradients() { return 0; }
  // The step's loss as reported: the mean over replicas of the local losses.
  virtual double reported_loss(double local) { return local; }
  // torch.nn.utils.clip_grad_norm_ over the whole model's gradients. Collective.
  virtual void clip_grad_norm(float max_norm);
  // The optimizer step -> seconds waited for peers in it.
  virtual double optimizer_step(optim::Optimizer& optimizer);

  virtual EvalResult evaluate(const data::Dataset& data, const EvalOptions& opts);
  // Every worker reaches this before a checkpoint is written.
  virtual void barrier() {}
  // The checkpoint after `step` under single-worker names, whole on the
  // reporter (elsewhere: empty). Collective.
  virtual Checkpoint checkpoint(int64_t step, optim::Optimizer& optimizer, const Compatibility& compat);
  // Takes this worker's part of a checkpoint; returns its step.
  virtual int64_t restore(const Checkpoint& ck, optim::Optimizer& optimizer);
  // What a checkpoint must match beyond the config: the layout (and its world size).
  virtual void describe_layout(Compatibility& compat) const {}
  // Writes the whole model's weights under single-worker names on the
  // reporter (collective when sharded(); a mesh streams a batch of tensors
  // at a time).
  virtual void write_weights(const std::string& path, const std::map<std::string, std::string>& metadata);
  // ids (1, T) -> the logits of position T - 1 over the whole vocabulary,
  // on every worker (models/generate.h); collective when sharded(), where it
  // runs through the shards. The caller sets eval mode and no graph.
  virtual std::vector<float> next_token_logits(const Tensor& ids);
  // Lines for the start of the run ("" = none): the layout, gradient
  // synchronisation (with the flags that tune it).
  virtual std::string describe() const { return ""; }
  virtual std::string describe_sync() const { return ""; }
  // Bytes of parameters this worker holds, at most so far (MemoryReport::parameters),
  // and of them the most held gathered beyond its own (MemoryReport::gathered).
  virtual int64_t parameter_bytes() const;
  virtual int64_t gathered_bytes() const { return 0; }
  // Bytes of gradients this worker holds after sync_gradients() (MemoryReport::gradients).
  virtual int64_t gradient_bytes() const;
  // Registered memory this worker's process groups handed out (MemoryReport::communication).
  virtual int64_t communication_bytes() const { return 0; }
  // Every worker's report, in rank order, on the reporter (collective).
  virtual std::vector<MemoryReport> gather_memory(const MemoryReport& mine) { return {mine}; }

 protected:
  // Around forward_backward's micro-batches: a guard under which backward
  // only accumulates locally (the first K−1), and the local loss known
  // before the last backward (a reduction may start and overlap it).
  virtual std::shared_ptr<void> accumulate_locally() { return nullptr; }
  virtual void loss_ready(double local) {}
  // The optimizer's whole state for a checkpoint (a sharded step gathers it). Collective when sharded.
  virtual optim::OptimizerState optimizer_state(const optim::Optimizer& optimizer) { return optimizer.state_dict(); }
  // gather_memory over `world`.
  static std::vector<MemoryReport> gather_over(comm::ProcessGroup& world, const MemoryReport& mine);
  // Parameter `name` of the --init file, or of an alias of it (a tied head
  // saved as lm_head.weight); an Error when the file has neither.
  static Tensor read_init(const nn::SafetensorsReader& file, const std::map<std::string, std::string>& aliases,
                          const std::string& name);

  nn::Model* model_ = nullptr;  // set by build()
  nn::NamedParameters params_;      // what build() returned
};

}  // namespace artel::train
