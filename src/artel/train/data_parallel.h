// Data parallelism for the training loop: every worker holds the whole model
// and trains on its own rows of each global batch; DistributedDataParallel
// averages the gradients over the process group (buckets in the backend's
// registered memory, all-reduces overlapping backward), the reported loss is
// the mean over workers, and only rank 0 prints and writes files. With
// --zero 1 the optimizer step is sharded over the workers, with --zero 2 the
// gradients too; --zero 3 is FullyShardedStrategy (fully_sharded_strategy.h).
// With --trace FILE, rank 0 writes every worker's compute and communication
// as a Chrome trace.
//
// Dropout: every worker starts from the same generator state and draws the
// same masks for its rows, so with dropout > 0 a data-parallel run is a valid
// run but not the one a single worker on the whole batch would take (that
// equivalence holds for dropout 0, the recipes' setting). Checkpoints stay
// exact: all workers' generators are in the same state after every step.
// Checkpoints are sharded (Note [Sharded checkpoints] in strategy.h): rank 0
// writes the model, or with --zero 1 every rank its owned elements.
//
//   auto pg = comm::init_process_group(comm::group_options_from_env({.backend = "shm"}));
//   DataParallelWorker w(cfg, {.out = &std::cout}, pg);
//   w.run();
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "artel/comm/process_group.h"
#include "artel/optim/clip.h"
#include "artel/parallel/distributed_data_parallel.h"
#include "artel/train/strategy.h"
#include "artel/train/trainer.h"

namespace artel::train {

class DataParallelStrategy : public Strategy {
 public:
  // `shard_optimizer`: --zero 1 (with more than one worker).
  DataParallelStrategy(std::shared_ptr<comm::ProcessGroup> group, parallel::DdpOptions opts);
  ~DataParallelStrategy() override;

  int64_t replica() const override { return group_->rank(); }
  int64_t replicas() const override { return group_->size(); }
  bool reporter() const override { return group_->rank() == 0; }
  bool synchronises() const override { return true; }
  // Replica r of n evaluates validation batches r, r + n, …, and one
  // all-reduce adds up the sums, as Megatron's evaluation does: n workers
  // take 1/n of the time that one worker, with the others idle, took.
  // The same batches as one worker's, summed in another order.
  bool evaluates_together() const override { return true; }
  EvalResult evaluate(const data::Dataset& data, const EvalOptions& opts) override {
    return evaluate_split(data, opts, false);
  }
  // The whole model, then DDP over it (which broadcasts rank 0's weights).
  nn::NamedParameters build(nn::Model& model, const data::Dataset& data, uint64_t seed,
                            const std::string& init) override;
  void attach(optim::Optimizer& optimizer) override;
  double sync_gradients() override { return ddp_->finish().count(); }
  double reported_loss(double local) override;
  void clip_grad_norm(float max_norm) override { clip_scale_ = optim::clip_coefficient(ddp_->grad_norm(), max_norm); }
  double optimizer_step(optim::Optimizer& optimizer) override {
    return ddp_->step(optimizer, std::exchange(clip_scale_, 1.0f)).count();
  }
  void barrier() override { group_->barrier()->wait(); }
  comm::ProcessGroup* world_group() override { return group_.get(); }
  std::string describe_sync() const override {
    const std::string hosts = ddp_->describe_hosts();
    return ddp_->describe() + " (--first-bucket-mb, --bucket-mb)" + (hosts.empty() ? "" : "; " + hosts);
  }
  int64_t gradient_bytes() const override { return ddp_->gradient_bytes(); }
  // Bytes this worker handed to the gradients' collectives in the step (what compression shrinks).
  nlohmann::ordered_json step_record() const override { return {{"grad_bytes", ddp_->reduced_bytes_last_step()}}; }
  int64_t communication_bytes() const override {
    return group_->allocated_bytes() - ddp_->registered_bucket_bytes();  // the buckets are the gradients (and weights)
  }
  std::vector<MemoryReport> gather_memory(const MemoryReport& mine) override { return gather_over(*group_, mine); }
  // Checkpoints add PowerSGD's state (Note [PowerSGD in checkpoints], powersgd_parts.h).
  std::vector<HeldPart> held_parts(optim::Optimizer& optimizer) override;
  std::vector<HeldPart> wanted_parts(optim::Optimizer& optimizer) override;
  bool parts_restored(const std::vector<HeldPart>& wanted, const std::vector<bool>& found) override;

 protected:
  std::shared_ptr<void> accumulate_locally() override;
  void loss_ready(double local) override;  // the loss all-reduce, issued before backward
  bool optimizer_sharded() const override { return opts_.shard_optimizer; }
  // evaluate()'s split; `lockstep` as evaluate_sums's (ZeRO-3).
  EvalResult evaluate_split(const data::Dataset& data, const EvalOptions& opts, bool lockstep);

 protected:
  std::shared_ptr<comm::ProcessGroup> group_;

 private:
  parallel::DdpOptions opts_;
  std::unique_ptr<parallel::DistributedDataParallel> ddp_;
  Tensor scalar_;       // the loss being averaged, in registered memory
  comm::WorkPtr mean_;  // its all-reduce, while in flight
};

class DataParallelWorker {
 public:
  // Builds the trainer for rank group->rank() of group->size(). Collective:
  // every rank of the group constructs one.
  DataParallelWorker(TrainConfig cfg, RunOptions run, std::shared_ptr<comm::ProcessGroup> group,
                     parallel::DdpOptions ddp = {});
  ~DataParallelWorker();

  // Trains; with --trace, rank 0 then writes every worker's timeline.
  RunSummary run();
  Trainer& trainer() { return *trainer_; }
  comm::ProcessGroup& group() { return *group_; }

 private:
  std::shared_ptr<comm::ProcessGroup> group_;
  std::unique_ptr<DataParallelStrategy> strategy_;
  std::unique_ptr<Trainer> trainer_;
};

}  // namespace artel::train
