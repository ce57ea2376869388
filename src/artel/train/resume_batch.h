// Keeping a checkpoint's global batch when a run resumes under another
// layout (trainer.h, Note [Resuming]): the loss curve of a run depends on its
// global batch, not on how the batch is split, so by default a resumed run
// keeps the one it was trained with, choosing --accum for it — as DeepSpeed
// keeps train_batch_size = micro batch × accumulation × data-parallel degree.
//
//   int64_t accum = accum_to_keep_global_batch(8, {.replicas = 1, .batch_size = 4}, path);   // 2
#pragma once

#include <cstdint>
#include <string>

#include "artel/train/train_config.h"

namespace artel::train {

struct BatchLayout {
  int64_t replicas = 1;       // data-parallel degree
  int64_t batch_size = 1;     // rows per replica per micro-step
  int64_t accum = 1;          // this run's accumulation
  bool accum_given = false;   // --accum was passed: the user chose this global batch
  bool mesh = false;          // tensor / pipeline parallel: no accumulation (the batch must hold it)
  int64_t micro_batches = 1;  // a mesh's, which must divide the batch
};

// The accumulation this run trains with after resuming from checkpoint
// `path` of global batch `global`: this run's own when it gives `global` or
// when --accum was given (the global batch then changes, and the data goes
// on from the samples consumed); otherwise the one that makes
// replicas × batch × accum = global. Throws a one-line Error listing valid
// choices when none does.
int64_t accum_to_keep_global_batch(int64_t global, const BatchLayout& run, const std::string& path);

// A resumed run has steps left after checkpoint `path`, taken after `step`:
// throws a one-line Error when `total_steps` does not reach past it.
void check_steps_after(int64_t step, int64_t total_steps, const std::string& path);

// Before any worker of a --resume run starts: the newest complete checkpoint
// in cfg.out/checkpoints, if there is one, must fit the run over `replicas`
// data-parallel replicas — its global batch kept by some --accum, its step
// within --steps (with --epochs the steps come from the data: the workers
// check them). Said once, as the workers would each say it. Nothing is
// checked where no checkpoint can be opened: the workers say why.
void check_resumable(const TrainConfig& cfg, int64_t replicas);

}  // namespace artel::train
