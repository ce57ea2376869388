#include "artel/train/recipe.h"

#include <filesystem>

#include "artel/core/error.h"
#include "artel/optim/adamw.h"
#include "artel/optim/sgd.h"
#include "artel/train/bundled_data.h"

namespace artel::train {

data::DatasetOptions dataset_options(const TrainConfig& cfg) {
  return {.block_size = cfg.block_size, .words = cfg.model == "wordlm", .val_path = cfg.val_data,
          .vocab_size = cfg.vocab_size};
}

std::unique_ptr<data::Dataset> open_run_data(const TrainConfig& cfg) {
  const std::string path = cfg.data.empty() ? default_data_for(cfg.model) : cfg.data;
  std::unique_ptr<data::Dataset> data = data::open_dataset(path, dataset_options(cfg));
  const bool text = data->kind() == data::DatasetKind::text;
  if (models::trains_on_text(cfg.model) && !text)
    throw Error("model " + cfg.model + " trains on a text file, but --data " + path + " is MNIST",
                "pass a text file, or --model mlp / cnn");
  if (!models::trains_on_text(cfg.model) && text)
    throw Error("model " + cfg.model + " trains on MNIST, but --data " + path + " is a " +
                    (std::filesystem::path(path).extension() == ".bin" ? "token file" : "text file"),
                "pass the MNIST directory, or --model gpt / wordlm");
  return data;
}

int64_t model_vocab(const TrainConfig& cfg, int64_t data_vocab) {
  return (data_vocab + cfg.vocab_multiple - 1) / cfg.vocab_multiple * cfg.vocab_multiple;
}

models::ModelConfig make_model_config(const TrainConfig& cfg, int64_t vocab_size) {
  models::ModelConfig m;
  m.kind = cfg.model;
  m.vocab_size = model_vocab(cfg, vocab_size);
  m.n_layer = cfg.n_layer;
  m.n_head = cfg.n_head;
  m.n_embd = cfg.n_embd;
  m.block_size = cfg.block_size;
  m.dropout = static_cast<float>(cfg.dropout);
  m.gelu = cfg.gelu;
  m.seed = static_cast<uint64_t>(cfg.seed);
  return m;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& cfg, const nn::NamedParameters& params) {
  auto lr = static_cast<float>(cfg.lr);
  auto wd = static_cast<float>(cfg.weight_decay);
  if (cfg.optimizer == "sgd") {
    optim::SgdOptions o;
    o.momentum = static_cast<float>(cfg.momentum);
    o.nesterov = cfg.nesterov;
    return std::make_unique<optim::Sgd>(optim::one_group(params, lr, wd), o);
  }
  optim::AdamWOptions o;
  o.beta1 = static_cast<float>(cfg.beta1);
  o.beta2 = static_cast<float>(cfg.beta2);
  o.eps = static_cast<float>(cfg.eps);
  return std::make_unique<optim::AdamW>(optim::decay_groups(params, lr, wd), o);
}

optim::LrSchedule make_schedule(const TrainConfig& cfg, int64_t total_steps) {
  optim::LrSchedule s;
  s.kind = optim::parse_lr_schedule_kind(cfg.lr_schedule);
  s.lr = static_cast<float>(cfg.lr);
  s.warmup_steps = cfg.warmup_steps;
  s.decay_steps = total_steps;
  s.min_lr = static_cast<float>(cfg.min_lr);
  s.validate();
  return s;
}

}  // namespace artel::train
