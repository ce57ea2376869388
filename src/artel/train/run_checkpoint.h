// What a training run puts in a checkpoint and takes back from one, through
// its strategy (Note [Sharded checkpoints] in strategy.h): every worker's
// parts of the model's weights ("model/<name>") and of the optimizer's state
// ("optim/<kind>.<name>", "optim/step.<name>"), each stage's dropout
// generator, and in the manifest the step, the samples consumed, the global
// batch, the layout and the model.
//
//   Compatibility c = run_compatibility(cfg, vocab_size);
//   save_run_checkpoint(strategy, optimizer, model, store, position);   // every worker
//   ...
//   RestoreOutcome r = restore_run_checkpoint(strategy, optimizer, model, ck);   // every worker
#pragma once

#include <cstdint>
#include <string>

#include "artel/nn/model.h"
#include "artel/optim/optimizer.h"
#include "artel/train/checkpoint.h"
#include "artel/train/checkpoint_reader.h"
#include "artel/train/checkpoint_store.h"
#include "artel/train/strategy.h"
#include "artel/train/train_config.h"

namespace artel::train {

// What a checkpoint must match to be resumed: the model kind and the sizes
// that shape its parameters (gpt: vocab, layers, heads, width, context;
// mlp/cnn: classes). The layout may differ.
Compatibility run_compatibility(const TrainConfig& cfg, int64_t vocab_size);

// Where a run stands after a step, for the manifest.
struct RunPosition {
  int64_t step = 0;
  int64_t consumed_samples = 0;
  int64_t global_batch = 0;
  nlohmann::json model;   // Compatibility::to_meta()
  nlohmann::json layout;  // Strategy::layout() and the batch settings
};

// Writes the checkpoint after `pos.step` (Note [Sharded checkpoint commit]
// in checkpoint_store.h). Collective: every worker calls it after the step.
void save_run_checkpoint(Strategy& strategy, optim::Optimizer& optimizer, nn::Model& model,
                         const CheckpointStore& store, const RunPosition& pos);

struct RestoreOutcome {
  bool ok = false;        // every worker read all it needs
  std::string problem;    // this worker's, when it could not ("" when another worker could not)
  bool dropout_restored = false;  // the checkpoint had this run's stage count
  bool compressor_restored = false;  // on every worker (Strategy::parts_restored)
};

// Reads this worker's parts of `ck` under its own layout into the model and
// the optimizer, and its stage's dropout generator when the stage count is
// the checkpoint's. Collective (the workers agree on the outcome); when
// !ok, the caller tries an older checkpoint, which overwrites everything.
RestoreOutcome restore_run_checkpoint(Strategy& strategy, optim::Optimizer& optimizer, nn::Model& model,
                                      const ShardedCheckpoint& ck);

}  // namespace artel::train
