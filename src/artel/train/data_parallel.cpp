#include "artel/train/data_parallel.h"

#include <iostream>
#include <set>

#include "artel/core/trace.h"
#include "artel/nn/embedding.h"
#include "artel/train/fully_sharded_strategy.h"
#include "artel/train/powersgd_parts.h"
#include "artel/train/trace_gather.h"

namespace artel::train {

DataParallelStrategy::DataParallelStrategy(std::shared_ptr<comm::ProcessGroup> group, parallel::DdpOptions opts)
    : group_(std::move(group)), opts_(std::move(opts)) {
  scalar_ = group_->alloc({1}, DType::f64);
}

DataParallelStrategy::~DataParallelStrategy() = default;

nn::NamedParameters DataParallelStrategy::build(nn::Model& model, const data::Dataset& data, uint64_t seed,
                                                const std::string& init) {
  nn::NamedParameters params = Strategy::build(model, data, seed, init);
  opts_.shard_optimizer = opts_.shard_optimizer && group_->size() > 1;
  opts_.shard_gradients = opts_.shard_gradients && opts_.shard_optimizer;
  // The model's embedding tables, whose lookups' rows DDP keeps apart (its
  // Note [Tables apart]), and of them the sparse ones (Note [Sparse tables]).
  std::set<const autograd::VariableImpl*> looked_up, sparse;
  for (const auto& [_, m] : model.named_modules())
    if (const auto* table = dynamic_cast<const nn::Embedding*>(m))
      (table->sparse() ? sparse : looked_up).insert(table->weight().impl());
  std::set<std::string> tables, sparse_tables;
  for (const auto& [name, v] : params) {
    if (looked_up.count(v.impl())) tables.insert(name);
    if (sparse.count(v.impl())) sparse_tables.insert(name);
  }
  opts_.tables = [tables](const std::string& name) { return tables.count(name) > 0; };
  opts_.sparse_tables = [sparse_tables](const std::string& name) { return sparse_tables.count(name) > 0; };
  ddp_ = std::make_unique<parallel::DistributedDataParallel>(params, *group_, opts_);
  return params;
}

void DataParallelStrategy::attach(optim::Optimizer& optimizer) { ddp_->shard(optimizer); }

// PowerSGD's state beside the model and optimizer (Note [PowerSGD in checkpoints]).
// (No ddp_: a derived strategy's own reduction, FSDP's, which PowerSGD refuses.)
std::vector<HeldPart> DataParallelStrategy::held_parts(optim::Optimizer& optimizer) {
  std::vector<HeldPart> parts = Strategy::held_parts(optimizer);
  add_powersgd_parts(parts, ddp_.get(), powersgd_position(group_->size()), group_->rank(), false);
  return parts;
}

std::vector<HeldPart> DataParallelStrategy::wanted_parts(optim::Optimizer& optimizer) {
  std::vector<HeldPart> parts = Strategy::wanted_parts(optimizer);
  add_powersgd_parts(parts, ddp_.get(), powersgd_position(group_->size()), group_->rank(), true);
  return parts;
}

bool DataParallelStrategy::parts_restored(const std::vector<HeldPart>& wanted, const std::vector<bool>& found) {
  return restore_powersgd(ddp_.get(), powersgd_position(group_->size()), group_->rank(), wanted, found);
}

std::shared_ptr<void> DataParallelStrategy::accumulate_locally() {
  return std::make_shared<parallel::DistributedDataParallel::NoSync>(*ddp_);
}

void DataParallelStrategy::loss_ready(double local) {
  scalar_.data<double>()[0] = local;
  mean_ = group_->all_reduce(scalar_, {.op = comm::ReduceOp::avg});
}

double DataParallelStrategy::reported_loss(double local) {
  if (!mean_) loss_ready(local);
  mean_->wait();
  mean_.reset();
  return scalar_.data<double>()[0];
}

EvalResult DataParallelStrategy::evaluate_split(const data::Dataset& data, const EvalOptions& opts, bool lockstep) {
  const EvalSums mine = evaluate_sums(*model_, data, opts, group_->rank(), group_->size(), lockstep);
  return eval_result(sum_over(*group_, mine), data, opts.accuracy);
}

DataParallelWorker::DataParallelWorker(TrainConfig cfg, RunOptions run, std::shared_ptr<comm::ProcessGroup> group,
                                       parallel::DdpOptions ddp)
    : group_(std::move(group)) {
  ddp.shard_optimizer = cfg.zero >= 1;
  ddp.shard_gradients = cfg.zero >= 2;
  if (cfg.zero == 3 && group_->size() > 1)
    strategy_ = std::make_unique<FullyShardedStrategy>(
        group_, parallel::FsdpOptions{.reshard_after_forward = cfg.reshard_after_forward,
                                      .allow_unused_parameters = ddp.allow_unused_parameters});
  else
    strategy_ = std::make_unique<DataParallelStrategy>(group_, std::move(ddp));
  trainer_ = std::make_unique<Trainer>(std::move(cfg), run, strategy_.get());
}

DataParallelWorker::~DataParallelWorker() = default;

RunSummary DataParallelWorker::run() {
  const std::string& path = trainer_->config().trace;
  trace::enable(!path.empty());
  RunSummary summary = trainer_->run();
  if (path.empty()) return summary;
  trace::enable(false);
  write_run_trace(path, group_.get(), "rank " + std::to_string(group_->rank()), std::cout);
  return summary;
}

}  // namespace artel::train
