// ModelMesh: any model (nn/model.h) trained over a DP × PP × TP mesh — this
// worker's shard, made from the model's own plan (parallel/model_shard.h),
// the pipeline executor running the chosen schedule over M micro-batches,
// and the bookkeeping that makes the shards act as one model for the
// training loop (it is the loop's Strategy, Note [Model-parallel seams] in
// strategy.h): a tied
// weight's gradient summed over the stages holding it, the global gradient
// norm over the replica (each parameter counted once, as its placement
// says), evaluation through the pipeline, the whole model gathered on rank
// 0 a batch of tensors at a time for weights files (single-worker names, so
// any layout's files compare), and checkpoints written as each worker's own
// parts (Note [Sharded checkpoints] in strategy.h).
//
// The reported loss: the last stage's tensor-parallel rank 0 holds each
// replica's step loss (the mean over its M micro-batches); the mean over
// replicas is an all-reduce over the world in which the others add zero.
//
//   MeshGroups groups = make_mesh_groups(world, cfg.pp, cfg.tp);
//   ModelMesh mesh(cfg, groups, {.buckets = cfg.bucket_options()});
//   Trainer t(cfg, run, &mesh);   // calls mesh.build(model, ...)
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "artel/comm/gather_named.h"
#include "artel/parallel/distributed_data_parallel.h"
#include "artel/parallel/model_shard.h"
#include "artel/parallel/mesh_groups.h"
#include "artel/parallel/pipeline_executor.h"
#include "artel/train/strategy.h"
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

class ModelMesh : public Strategy {
 public:
  // `ddp`: data parallelism over the replicas (when dp > 1), its step
  // sharded with --zero 1.
  ModelMesh(const TrainConfig& cfg, parallel::MeshGroups groups, parallel::DdpOptions ddp = {});
  ~ModelMesh() override;

  int64_t replica() const override { return groups_.coord.dp; }
  int64_t replicas() const override { return groups_.topology.degree(parallel::Axis::dp); }
  bool reporter() const override { return groups_.world->rank() == 0; }
  bool sharded() const override { return true; }
  bool synchronises() const override { return true; }
  // This worker's shard of the model's plan: drawn from the seed, or only
  // its own parts read from `init`.
  nn::NamedParameters build(nn::Model& model, const data::Dataset& data, uint64_t seed,
                            const std::string& init) override;
  void attach(optim::Optimizer& optimizer) override;  // DDP over the shard, ZeRO-1 with --zero 1
  double forward_backward(std::span<const data::Batch> micro_batches) override;
  // DDP's wait plus the tied weights' sum over the stages holding them; exposed seconds.
  double sync_gradients() override;
  double reported_loss(double local) override;
  void clip_grad_norm(float max_norm) override;
  double optimizer_step(optim::Optimizer& optimizer) override;
  EvalResult evaluate(const data::Dataset& ds, const EvalOptions& opts) override;
  void barrier() override { groups_.world->barrier()->wait(); }
  comm::ProcessGroup* world_group() override { return groups_.world.get(); }
  int stage() const override { return groups_.coord.pp; }
  int stages() const override { return static_cast<int>(cfg_.pp); }
  bool writes_dropout() const override { return groups_.coord.dp == 0 && groups_.coord.tp == 0; }
  nlohmann::json layout() override;
  void write_weights(const std::string& path, const std::map<std::string, std::string>& metadata) override;
  std::vector<float> next_token_logits(const Tensor& ids) override;  // through the pipeline and tp ranks
  std::string describe() const override;
  std::string describe_sync() const override {
    return ddp_ ? ddp_->describe() + " (--first-bucket-mb, --bucket-mb)" : "";
  }
  int64_t gradient_bytes() const override { return ddp_ ? ddp_->gradient_bytes() : Strategy::gradient_bytes(); }
  int64_t communication_bytes() const override;  // over all of this worker's groups
  // Checkpoints add the PowerSGD state of this worker's stage and
  // tensor-parallel rank (Note [PowerSGD in checkpoints], powersgd_parts.h).
  std::vector<HeldPart> held_parts(optim::Optimizer& optimizer) override;
  std::vector<HeldPart> wanted_parts(optim::Optimizer& optimizer) override;
  bool parts_restored(const std::vector<HeldPart>& wanted, const std::vector<bool>& found) override;
  std::vector<MemoryReport> gather_memory(const MemoryReport& mine) override { return gather_over(*groups_.world, mine); }

  const parallel::MeshGroups& groups() const { return groups_; }
  nn::NamedParameters parameters() const { return shard_->parameters(); }
  // Each (virtual) stage's layers, in layer numbers ("blocks" of a GPT), in
  // pipeline order: P·chunks of them under the interleaved schedule.
  std::vector<parallel::PieceRange> stage_layers() const;
  // Stage `stage`'s layers: "[2,4)", or its chunks' "[1,2)+[3,4)".
  std::string layers_of_stage(int stage) const;
  const StageStats& stats() const { return stats_; }
  bool holds_loss() const;  // the last stage's tensor-parallel rank 0

 protected:
  // Each tensor-parallel part written by its ranks of replica 0 (a
  // replicated parameter by tensor-parallel rank 0, a tied one by the first
  // stage holding it), or with --zero 1 by every replica its owned elements.
  std::vector<ParameterHolding> holdings(const optim::Optimizer& optimizer) const override;
  // The buffers of this stage's pieces (and those of no piece, on the first
  // stage), written by the stage's first replica's tensor-parallel rank 0.
  std::vector<std::pair<std::string, Tensor>> checkpoint_buffers(const nn::Model& model, bool writing) const override;

 private:
  std::vector<parallel::PieceRange> partition(nn::Model& model, const data::Dataset& data);
  std::vector<double> measured_costs(const data::Dataset& data);
  comm::NamedTensors gather_to_root(const comm::NamedTensors& mine);  // parameters whole on rank 0 (weights files)
  bool counts_in_norm(const std::string& name) const;
  std::string powersgd_position() const;  // this worker's prefix of PowerSGD's checkpoint keys
  EvalResult evaluate_batches(const std::vector<data::Batch>& mine, bool accuracy);
  // The loss of the last stage's output, its logits checked to cover the
  // data's classes where they are whole (not split over tensor parallelism).
  Variable stage_loss(const Variable& logits, const Tensor& targets);

  TrainConfig cfg_;
  parallel::MeshGroups groups_;
  parallel::DdpOptions ddp_options_;
  std::vector<parallel::PieceRange> stages_;
  std::vector<bool> layers_;                // per piece: a layer (nn::Piece::layer)
  std::vector<double> measured_;            // --stage-layers cost: ms per piece the split was balanced by
  parallel::ScheduleKind schedule_;
  std::unique_ptr<parallel::ModelShard> shard_;
  std::unique_ptr<parallel::PipelineExecutor> executor_;
  std::unique_ptr<parallel::DistributedDataParallel> ddp_;
  std::vector<Variable> tied_;  // this shard's weights held by several stages, for the gradient sum
  Tensor scalar_;               // loss / norm being reduced
  StageStats stats_;
};

}  // namespace artel::train
