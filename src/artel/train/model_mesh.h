// ModelMesh: any model (nn/model.h) trained over a DP × PP × TP mesh — this
// worker's shard, made from the model's own plan (parallel/model_shard.h),
// the pipeline executor running the chosen schedule over M micro-batches,
// and the bookkeeping that makes the shards act as one model for the
// training loop (Note [Model-parallel seams] in model_parallel.h): a tied
// weight's gradient summed over the stages holding it, the global gradient
// norm over the replica (each parameter counted once, as its placement
// says), evaluation through the pipeline, and the whole model gathered on
// rank 0 for weights and checkpoints (single-worker names, so any layout's
// files compare).
//
// The reported loss: the last stage's tensor-parallel rank 0 holds each
// replica's step loss (the mean over its M micro-batches); the mean over
// replicas is an all-reduce over the world in which the others add zero.
//
//   MeshGroups groups = make_mesh_groups(world, cfg.pp, cfg.tp);
//   ModelMesh mesh(cfg, groups);
//   Trainer t(cfg, run, {... .model_parallel = &mesh});   // calls mesh.shard(model)
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "artel/comm/gather_named.h"
#include "artel/parallel/distributed_data_parallel.h"
#include "artel/parallel/model_shard.h"
#include "artel/parallel/mesh_groups.h"
#include "artel/parallel/pipeline_executor.h"
#include "artel/train/model_parallel.h"
#include "artel/train/train_config.h"

namespace artel::train {

using autograd::Variable;

// Throws a one-line Error when `cfg`'s layout cannot run on `world` workers:
// tp · pp not dividing it, or the model's plan not fitting the layout (more
// stages than layers, a split the group does not divide); the rest — heads,
// micro-batches — TrainConfig::validate checks.
void check_mesh(const TrainConfig& cfg, int world);

// What one stage measured over the steps so far (for the end-of-run table).
struct StageStats {
  int peak_live_micro_batches = 0;   // forwards held at once awaiting their backward
  int64_t peak_activation_bytes = 0; // tensor bytes held above the step's start, at most
};

class ModelMesh : public ModelParallel {
 public:
  ModelMesh(const TrainConfig& cfg, parallel::MeshGroups groups);
  ~ModelMesh() override;

  nn::NamedParameters shard(models::Model& model, const data::Dataset& data) override;
  double forward_backward(const data::Batch& batch) override;
  void clip_grad_norm(float max_norm) override;
  EvalResult evaluate(const data::Dataset& ds, const EvalOptions& opts) override;
  void write_weights(const std::string& path, const std::map<std::string, std::string>& metadata) override;
  void gather_into(models::Model* full) override;
  Checkpoint checkpoint(int64_t step, const optim::Optimizer& optimizer, const Compatibility& compat) override;
  int64_t restore(const Checkpoint& ck, optim::Optimizer& optimizer) override;
  nlohmann::json layout() const override;
  std::string describe() const override;

  // Data parallelism over the replicas (when dp > 1): DDP on the shard's
  // parameters, the step sharded with --zero 1. Call after shard(), before training.
  void start_data_parallel(parallel::DdpOptions opts, optim::Optimizer& optimizer);
  // WorkerHooks::optimizer_step: the step (and, sharded, the weights'
  // all-gather) -> seconds waited for peers.
  double step(optim::Optimizer& optimizer);
  // WorkerHooks::before_checkpoint: a sharded step's state put together.
  void gather_optimizer_state(optim::Optimizer& optimizer);
  // DDP's buckets ("" without data parallelism).
  std::string describe_data_parallel() const { return ddp_ ? ddp_->describe() : ""; }
  // WorkerHooks::sync_gradients: DDP's wait plus the tied embedding's sum; exposed seconds.
  double sync_gradients();
  // WorkerHooks::mean_over_workers.
  double reported_loss(double local);

  const parallel::MeshGroups& groups() const { return groups_; }
  nn::NamedParameters parameters() const { return shard_->parameters(); }
  // Each stage's layers, in layer numbers ("blocks" of a GPT).
  std::vector<parallel::PieceRange> stage_layers() const;
  const StageStats& stats() const { return stats_; }
  bool holds_loss() const;  // the last stage's tensor-parallel rank 0

 private:
  std::vector<parallel::PieceRange> partition(models::Model& model, const data::Dataset& data);
  std::vector<double> measured_costs(const data::Dataset& data);
  comm::NamedTensors gather_to_root(const comm::NamedTensors& mine, const std::function<std::string(const std::string&)>& param_of);
  bool counts_in_norm(const std::string& name) const;
  EvalResult evaluate_batches(const std::vector<data::Batch>& mine, bool accuracy);

  TrainConfig cfg_;
  parallel::MeshGroups groups_;
  std::vector<parallel::PieceRange> stages_;
  std::vector<bool> layers_;                // per piece: a layer (nn::Piece::layer)
  std::vector<double> measured_;            // --stage-layers cost: ms per piece the split was balanced by
  parallel::ScheduleKind schedule_;
  models::Model* model_ = nullptr;
  std::unique_ptr<parallel::ModelShard> shard_;
  std::unique_ptr<parallel::PipelineExecutor> executor_;
  std::unique_ptr<parallel::DistributedDataParallel> ddp_;
  std::vector<Variable> tied_;  // this shard's weights held by several stages, for the gradient sum
  Tensor scalar_;               // loss / norm being reduced
  StageStats stats_;
};

}  // namespace artel::train
