#include "artel/train/fully_sharded_strategy.h"

#include <utility>

#include "artel/nn/init.h"
#include "artel/nn/safetensors.h"

namespace artel::train {

FullyShardedStrategy::FullyShardedStrategy(std::shared_ptr<comm::ProcessGroup> group, parallel::FsdpOptions opts)
    : DataParallelStrategy(std::move(group), {}), fsdp_options_(opts) {}

FullyShardedStrategy::~FullyShardedStrategy() = default;

// Each parameter's whole value only while its unit is being cut: drawn as the
// whole model would draw it (Note [Declared parameters]), or read from --init.
nn::NamedParameters FullyShardedStrategy::build(nn::Model& model, const data::Dataset& data, uint64_t seed,
                                                const std::string& init) {
  model_ = &model;
  data_classes_ = data.num_classes();
  std::unique_ptr<nn::SafetensorsReader> file = init.empty() ? nullptr : std::make_unique<nn::SafetensorsReader>(init);
  if (file) check_init_holds_only(*file, model);
  const std::map<std::string, std::string> aliases = model.aliases();
  auto whole = [&](const nn::DeclaredParameter& d) {
    if (file) return read_init(*file, aliases, d.name);
    if (!d.init) return d.param.value();  // given a value at registration
    Tensor t = Tensor::empty(d.shape);
    nn::fill(t, *d.init, seed, nn::stream_of(d.name), d.shape);
    return t;
  };
  fsdp_ = std::make_unique<parallel::FullyShardedDataParallel>(model, *group_, fsdp_options_, whole);
  params_ = fsdp_->parameters();
  return params_;
}

double FullyShardedStrategy::optimizer_step(optim::Optimizer& optimizer) {
  optimizer.step(std::exchange(clip_scale_, 1.0f));  // the shards, in place: the next gather brings everyone's
  return 0;
}

std::vector<ParameterHolding> FullyShardedStrategy::owned_holdings(const optim::Optimizer& optimizer) const {
  std::vector<ParameterHolding> out;
  for (const auto& [name, p] : params_)
    out.push_back({.name = name, .value = fsdp_->owned_value(name), .whole = p.shape(), .writes_state = true,
                   .writes_step = reporter()});
  return out;
}

std::vector<HeldPart> FullyShardedStrategy::held_parts(optim::Optimizer& optimizer) {
  std::vector<HeldPart> parts = parts_to_write(owned_holdings(optimizer), optimizer);  // state and step counts
  for (const auto& [name, p] : params_)
    if (const optim::ElementRange r = optimizer.owned(name); r.size() > 0)
      parts.push_back({kModelKey + name, DType::f32, p.shape(), nn::Split{}, 0, 1, r, fsdp_->owned_value(name)});
  return parts;
}

std::vector<HeldPart> FullyShardedStrategy::wanted_parts(optim::Optimizer& optimizer) {
  std::vector<HeldPart> parts;
  for (HeldPart& part : parts_to_read(owned_holdings(optimizer), optimizer)) {
    if (part.key.compare(0, std::string(kModelKey).size(), kModelKey) == 0) {
      // parts_to_read asks for the value whole; this rank's value is its owned range of it.
      part.range = optimizer.owned(part.key.substr(std::string(kModelKey).size()));
      if (part.range.size() == 0) continue;
    }
    parts.push_back(std::move(part));
  }
  return parts;
}

std::shared_ptr<void> FullyShardedStrategy::accumulate_locally() {
  return std::make_shared<parallel::FullyShardedDataParallel::NoSync>(*fsdp_);
}

void FullyShardedStrategy::write_weights(const std::string& path, const std::map<std::string, std::string>& metadata) {
  std::unique_ptr<nn::SafetensorsWriter> file;
  if (reporter()) {
    std::map<std::string, std::pair<DType, Shape>> layout;
    for (const nn::DeclaredParameter& d : model_->declared_parameters()) layout[d.name] = {DType::f32, d.shape};
    file = std::make_unique<nn::SafetensorsWriter>(path, layout, metadata);
  }
  fsdp_->for_each_whole([&](const std::string& name, const Tensor& t) {
    if (file) file->write(name, t);
  });
  if (file) file->commit();
}

}  // namespace artel::train
