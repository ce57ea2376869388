// From a TrainConfig to the objects a run trains with: how its data is read, the model's config,
// the optimizer (AdamW with decay on >= 2-D parameters only, or SGD) and the
// learning-rate schedule. Kept apart from the loop so a data-parallel or
// sharded trainer builds exactly the same recipe.
//
//   auto opt = make_optimizer(cfg, model.named_parameters());
//   optim::LrSchedule lr = make_schedule(cfg, total_steps);
//   opt->set_lr(lr.at(k - 1));   // step k (1-based) has done k-1 updates
#pragma once

#include <memory>

#include "artel/data/dataset.h"
#include "artel/models/model.h"
#include "artel/optim/lr_schedule.h"
#include "artel/optim/optimizer.h"
#include "artel/train/train_config.h"

namespace artel::train {

// How the model of `cfg` reads its --data (words for wordlm, else characters).
data::DatasetOptions dataset_options(const TrainConfig& cfg);

// The data a built-in model trains on: --data (the model's bundled data when
// empty), read as the model reads it (dataset_options). Throws when the model
// cannot train on it: gpt and wordlm train on text, mlp and cnn on MNIST.
std::unique_ptr<data::Dataset> open_run_data(const TrainConfig& cfg);

// The model's vocabulary for data of `data_vocab` classes: rounded up to
// cfg.vocab_multiple (the padding rows are never a target).
int64_t model_vocab(const TrainConfig& cfg, int64_t data_vocab);

// `vocab_size` comes from the data (ignored by mlp, cnn), padded by model_vocab.
models::ModelConfig make_model_config(const TrainConfig& cfg, int64_t vocab_size);

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& cfg, const nn::NamedParameters& params);

// Cosine decays over the whole run (`total_steps`) to cfg.min_lr (< 0: lr/10).
optim::LrSchedule make_schedule(const TrainConfig& cfg, int64_t total_steps);

}  // namespace artel::train
