// What a training run puts in a checkpoint and takes back from one: the
// model's weights ("model/<name>"), the optimizer's state ("optim/<key>":
// step counts, momentum / Adam moments), the step and sampler position (the
// next 0-based batch index, which is the step count: batches are a pure
// function of the index, data/sampler.h) and the dropout generator's state.
// Every worker of a data-parallel job holds the same values after a step, so
// one file (written by rank 0) restores them all.
//
//   Compatibility c = run_compatibility(cfg, vocab_size, world_size);
//   store.save(make_run_checkpoint(model, optimizer.state_dict(), step, c));
//   ...
//   if (auto ck = store.load_latest(c, warn)) step = restore_run_checkpoint(*ck, model, optimizer);
#pragma once

#include <cstdint>

#include "artel/nn/model.h"
#include "artel/optim/optimizer.h"
#include "artel/train/checkpoint.h"
#include "artel/train/train_config.h"

namespace artel::train {

// What a checkpoint must match to be resumed: the model kind, the sizes that
// shape its parameters (gpt: vocab, layers, heads, width, context; mlp/cnn:
// classes) and the world size.
Compatibility run_compatibility(const TrainConfig& cfg, int64_t vocab_size, int64_t world_size);

// The checkpoint after `step` optimizer steps. Tensors alias the live ones:
// write it before the next step.
Checkpoint make_run_checkpoint(nn::Model& model, const optim::OptimizerState& optimizer, int64_t step,
                               const Compatibility& compat);

// Copies weights, optimizer state and the dropout generator back; returns the
// step the checkpoint was taken after. Throws an Error naming the file and the
// missing or mismatched tensor.
int64_t restore_run_checkpoint(const Checkpoint& ck, nn::Model& model, optim::Optimizer& optimizer);

}  // namespace artel::train
