// --zero 3 for the training loop: data parallelism whose workers hold 1/N of
// the weights, gradients and optimizer state (parallel/fully_sharded.h). The
// model is cut as it is built, a unit at a time, drawn from the seed or read
// from --init; weights files are written a unit at a time; evaluation and
// sampling gather the units as they run, so every worker takes part in them
// (sharded()), evaluation with the batches split between them. Averaging
// the loss, barriers and memory reports are data parallelism's.
//
//   FullyShardedStrategy fsdp(pg, {.reshard_after_forward = true});
//   Trainer t(cfg, run, &fsdp);
#pragma once

#include <memory>

#include "artel/parallel/fully_sharded.h"
#include "artel/train/data_parallel.h"

namespace artel::train {

class FullyShardedStrategy : public DataParallelStrategy {
 public:
  FullyShardedStrategy(std::shared_ptr<comm::ProcessGroup> group, parallel::FsdpOptions opts);
  ~FullyShardedStrategy() override;

  bool sharded() const override { return true; }
  // The replicas split the batches as data parallelism's do, in lockstep:
  // each forward gathers the units, so a replica out of batches runs one more
  // forward (left out of the sums) while another still has a batch.
  EvalResult evaluate(const data::Dataset& data, const EvalOptions& opts) override {
    return evaluate_split(data, opts, true);
  }
  nn::NamedParameters build(nn::Model& model, const data::Dataset& data, uint64_t seed,
                            const std::string& init) override;
  void attach(optim::Optimizer& optimizer) override { fsdp_->shard(optimizer); }
  double sync_gradients() override { return fsdp_->finish().count(); }
  void clip_grad_norm(float max_norm) override { clip_scale_ = optim::clip_coefficient(fsdp_->grad_norm(), max_norm); }
  double optimizer_step(optim::Optimizer& optimizer) override;
  void write_weights(const std::string& path, const std::map<std::string, std::string>& metadata) override;
  std::string describe_sync() const override { return fsdp_->describe(); }
  int64_t parameter_bytes() const override { return fsdp_->parameter_bytes(); }
  int64_t gathered_bytes() const override { return fsdp_->peak_gathered_bytes(); }
  int64_t gradient_bytes() const override { return fsdp_->gradient_bytes(); }
  int64_t communication_bytes() const override { return fsdp_->peak_staging_bytes(); }
  // Its gathers and reduce-scatters go unit by unit, not through DDP's buckets: no grad_bytes.
  nlohmann::ordered_json step_record() const override { return nlohmann::ordered_json::object(); }
  // Each rank writes and reads back its own elements of every parameter and
  // of their optimizer state (Note [Regions of a whole tensor]'s flat ranges).
  std::vector<HeldPart> held_parts(optim::Optimizer& optimizer) override;
  std::vector<HeldPart> wanted_parts(optim::Optimizer& optimizer) override;

 protected:
  std::shared_ptr<void> accumulate_locally() override;

 private:
  // The owned elements as each parameter's value (all that exists of it at rest), no weights to write.
  std::vector<ParameterHolding> owned_holdings(const optim::Optimizer& optimizer) const;
  parallel::FsdpOptions fsdp_options_;
  std::unique_ptr<parallel::FullyShardedDataParallel> fsdp_;
};

}  // namespace artel::train
