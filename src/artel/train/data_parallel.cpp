#include "artel/train/data_parallel.h"

#include <iostream>

#include "artel/core/trace.h"
#include "artel/train/trace_gather.h"

namespace artel::train {

DataParallelWorker::DataParallelWorker(TrainConfig cfg, RunOptions run, std::shared_ptr<comm::ProcessGroup> group,
                                       DataParallelOptions opts)
    : group_(std::move(group)) {
  scalar_ = group_->alloc({1}, DType::f64);
  trainer_ = std::make_unique<Trainer>(std::move(cfg), run, hooks(std::move(opts.after_step)));
  opts.ddp.shard_optimizer = trainer_->config().zero == 1 && group_->size() > 1;
  ddp_ = std::make_unique<parallel::DistributedDataParallel>(trainer_->model().named_parameters(), *group_, opts.ddp);
  ddp_->shard(trainer_->optimizer());
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

WorkerHooks DataParallelWorker::hooks(std::function<void(int64_t)> after_step) {
  WorkerHooks h;
  h.rank = group_->rank();
  h.world_size = group_->size();
  h.reporter = group_->rank() == 0;
  // The hooks run inside Trainer::run(), after the constructor made ddp_.
  h.sync_gradients = [this] { return ddp_->finish().count(); };
  h.mean_over_workers = [this](double local) { return mean_over_workers(local); };
  h.loss_ready = [this](double local) { start_mean(local); };
  h.no_sync = [this] { return std::make_shared<parallel::DistributedDataParallel::NoSync>(*ddp_); };
  h.barrier = [this] { group_->barrier()->wait(); };
  h.describe_sync = [this] { return ddp_->describe(); };
  h.clip_grad_norm = [this](float max_norm) { return ddp_->clip_grad_norm(max_norm); };
  h.optimizer_step = [this] { return ddp_->step(trainer_->optimizer()).count(); };
  h.before_checkpoint = [this] { ddp_->gather_optimizer_state(trainer_->optimizer()); };
  h.after_step = std::move(after_step);
  return h;
}

void DataParallelWorker::start_mean(double local) {
  scalar_.data<double>()[0] = local;
  mean_ = group_->all_reduce(scalar_, {.op = comm::ReduceOp::avg});
}

double DataParallelWorker::mean_over_workers(double local) {
  if (!mean_) start_mean(local);
  mean_->wait();
  mean_.reset();
  return scalar_.data<double>()[0];
}

}  // namespace artel::train
