// One worker of a data-parallel training job: a Trainer whose gradients are
// averaged over the process group by DistributedDataParallel (buckets in the
// backend's registered memory, all-reduces overlapping backward), whose
// reported loss is the mean over workers, and of which only rank 0 prints
// and writes files. See Note [Data-parallel seams] in trainer.h. With
// --trace FILE, rank 0 writes every worker's compute and communication as a
// Chrome trace.
//
// Dropout: every worker starts from the same generator state and draws the
// same masks for its rows, so with dropout > 0 a data-parallel run is a valid
// run but not the one a single worker on the whole batch would take (that
// equivalence holds for dropout 0, the recipes' setting). Checkpoints stay
// exact: all workers' generators are in the same state after every step.
//
//   auto pg = comm::init_process_group(comm::group_options_from_env({.backend = "shm"}));
//   DataParallelWorker w(cfg, {.out = &std::cout}, pg);
//   w.run();
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "artel/comm/process_group.h"
#include "artel/parallel/distributed_data_parallel.h"
#include "artel/train/trainer.h"

namespace artel::train {

struct DataParallelOptions {
  parallel::DdpOptions ddp;
  std::function<void(int64_t)> after_step;  // WorkerHooks::after_step (fault injection in tests)
};

class DataParallelWorker {
 public:
  // Builds the trainer for rank pg->rank() of pg->size() and wraps its model
  // in DDP (which broadcasts rank 0's weights). Collective: every rank of the
  // group constructs one.
  DataParallelWorker(TrainConfig cfg, RunOptions run, std::shared_ptr<comm::ProcessGroup> group,
                     DataParallelOptions opts = {});
  ~DataParallelWorker();

  // Trains; with --trace, rank 0 then writes every worker's timeline.
  RunSummary run();
  Trainer& trainer() { return *trainer_; }
  comm::ProcessGroup& group() { return *group_; }

 private:
  WorkerHooks hooks(std::function<void(int64_t)> after_step);
  void start_mean(double local);           // the loss all-reduce, issued before backward
  double mean_over_workers(double local);  // its result (issued now if not yet)

  std::shared_ptr<comm::ProcessGroup> group_;
  std::unique_ptr<parallel::DistributedDataParallel> ddp_;
  std::unique_ptr<Trainer> trainer_;
  Tensor scalar_;  // the loss being averaged, in registered memory
  comm::WorkPtr mean_;  // its all-reduce, while in flight
};

}  // namespace artel::train
