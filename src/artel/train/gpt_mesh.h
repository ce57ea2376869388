// GptMesh: the GPT trained over a DP × PP × TP mesh — this worker's shard
// (parallel/gpt_shard.h), the pipeline executor running the chosen schedule
// over M micro-batches, and the bookkeeping that makes the shards act as one
// model for the training loop (Note [Model-parallel seams] in
// model_parallel.h): the tied embedding's gradient summed over first and
// last stage, the global gradient norm over the replica, evaluation through
// the pipeline, and the whole model gathered on rank 0 for weights and
// checkpoints (single-worker names, so any layout's files compare).
//
// The reported loss: the last stage's tensor-parallel rank 0 holds each
// replica's step loss (the mean over its M micro-batches); the mean over
// replicas is an all-reduce over the world in which the others add zero.
//
//   MeshGroups groups = make_mesh_groups(world, cfg.pp, cfg.tp);
//   GptMesh mesh(cfg, groups);
//   Trainer t(cfg, run, {... .model_parallel = &mesh});   // calls mesh.shard(full)
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "artel/comm/gather_named.h"
#include "artel/parallel/distributed_data_parallel.h"
#include "artel/parallel/gpt_shard.h"
#include "artel/parallel/mesh_groups.h"
#include "artel/parallel/pipeline_executor.h"
#include "artel/train/model_parallel.h"
#include "artel/train/train_config.h"

namespace artel::train {

using autograd::Variable;

// Throws a one-line Error when `cfg`'s layout cannot run on `world` workers:
// tp · pp not dividing it, or the data's vocabulary not splitting over tp
// (the rest — heads, stages, micro-batches — TrainConfig::validate checks).
void check_mesh(const TrainConfig& cfg, int world);

// What one stage measured over the steps so far (for the end-of-run table).
struct StageStats {
  int peak_live_micro_batches = 0;   // forwards held at once awaiting their backward
  int64_t peak_activation_bytes = 0; // tensor bytes held above the step's start, at most
};

class GptMesh : public ModelParallel {
 public:
  GptMesh(const TrainConfig& cfg, parallel::MeshGroups groups);
  ~GptMesh() override;

  nn::NamedParameters shard(models::Model& full) override;
  double forward_backward(const data::Batch& batch) override;
  void clip_grad_norm(float max_norm) override;
  EvalResult evaluate(const data::Dataset& ds, const EvalOptions& opts) override;
  void gather_into(models::Model& full) override;
  Checkpoint checkpoint(int64_t step, const optim::Optimizer& optimizer, const Compatibility& compat) override;
  int64_t restore(const Checkpoint& ck, optim::Optimizer& optimizer) override;
  nlohmann::json layout() const override;
  std::string describe() const override;

  // Data parallelism over the replicas (when dp > 1): DDP on the shard's
  // parameters. Call after shard(), before training.
  void start_data_parallel(const parallel::DdpOptions& opts);
  // DDP's buckets ("" without data parallelism).
  std::string describe_data_parallel() const { return ddp_ ? ddp_->describe() : ""; }
  // WorkerHooks::sync_gradients: DDP's wait plus the tied embedding's sum; exposed seconds.
  double sync_gradients();
  // WorkerHooks::mean_over_workers.
  double reported_loss(double local);

  const parallel::MeshGroups& groups() const { return groups_; }
  const std::vector<parallel::BlockRange>& stages() const { return stages_; }
  const StageStats& stats() const { return stats_; }
  bool holds_loss() const;  // the last stage's tensor-parallel rank 0

 private:
  std::vector<parallel::BlockRange> partition(const models::Model& full);
  parallel::PieceCosts measured_costs(const models::Model& full);
  comm::NamedTensors gather_to_root(const comm::NamedTensors& mine, const std::function<std::string(const std::string&)>& param_of);
  bool counts_in_norm(const std::string& name) const;

  TrainConfig cfg_;
  parallel::MeshGroups groups_;
  std::vector<parallel::BlockRange> stages_;
  std::optional<parallel::PieceCosts> measured_;  // --stage-layers cost: what the split was balanced by
  parallel::ScheduleKind schedule_;
  std::unique_ptr<parallel::GptShard> shard_;
  std::unique_ptr<parallel::PipelineExecutor> executor_;
  std::unique_ptr<parallel::DistributedDataParallel> ddp_;
  Variable tied_embedding_;     // this shard's wte (first or last stage), for the gradient sum
  Tensor scalar_;               // loss / norm being reduced
  StageStats stats_;
};

}  // namespace artel::train
