#include "artel/train/run_checkpoint.h"

#include <string>

#include "artel/core/error.h"

namespace artel::train {

namespace {
constexpr const char* kModel = "model/";
constexpr const char* kOptim = "optim/";
}  // namespace

Compatibility run_compatibility(const TrainConfig& cfg, int64_t vocab_size, int64_t world_size) {
  Compatibility c;
  c.model_kind = cfg.model;
  if (cfg.model == "gpt")
    c.model_config = {{"vocab_size", vocab_size}, {"n_layer", cfg.n_layer},   {"n_head", cfg.n_head},
                      {"n_embd", cfg.n_embd},     {"block_size", cfg.block_size}};
  else
    c.model_config = {{"num_classes", vocab_size}};
  c.world_size = world_size;
  return c;
}

Checkpoint make_run_checkpoint(nn::Model& model, const optim::OptimizerState& optimizer, int64_t step,
                               const Compatibility& compat) {
  Checkpoint ck;
  ck.step = step;
  ck.sampler_position = step;  // step k (1-based) reads batch k-1: the next batch index is the step count
  ck.meta = compat.to_meta();
  for (auto& [name, p] : model.named_parameters()) ck.add(kModel + name, p.value());
  for (auto& [key, t] : optimizer) ck.add(kOptim + key, t);
  ck.rng = {model.dropout_rng() ? model.dropout_rng()->state() : RngState{}};  // a model without dropout: a placeholder
  return ck;
}

int64_t restore_run_checkpoint(const Checkpoint& ck, nn::Model& model, optim::Optimizer& optimizer) {
  ARTEL_CHECK(ck.sampler_position == ck.step, "checkpoint ", ck.path, ": sampler position ", ck.sampler_position,
              " differs from its step ", ck.step, " (not written by artel train)");
  ARTEL_CHECK(ck.rng.size() == 1, "checkpoint ", ck.path, " holds ", ck.rng.size(),
              " generator states, artel train writes 1 (the dropout generator)");
  for (auto& [name, p] : model.named_parameters()) ck.restore(kModel + name, p.value());
  optim::OptimizerState state;
  const std::string prefix = kOptim;
  for (const auto& [name, t] : ck.tensors)
    if (name.compare(0, prefix.size(), prefix) == 0) state[name.substr(prefix.size())] = t;
  optimizer.load_state_dict(state);
  if (model.dropout_rng()) model.dropout_rng()->set_state(ck.rng[0]);
  return ck.step;
}

}  // namespace artel::train
