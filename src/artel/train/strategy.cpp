#include "artel/train/strategy.h"

#include <set>
#include <utility>

#include "artel/autograd/ops.h"
#include "artel/core/error.h"
#include "artel/core/memory_stats.h"
#include "artel/core/trace.h"
#include "artel/models/hf_gpt2.h"
#include "artel/nn/safetensors.h"
#include "artel/optim/clip.h"

namespace artel::train {

nn::NamedParameters Strategy::build(nn::Model& model, const data::Dataset& data, uint64_t seed,
                                    const std::string& init) {
  model_ = &model;
  data_classes_ = data.num_classes();
  if (init.empty()) nn::materialize(model, seed);
  else if (models::is_hf_gpt2(init)) models::load_hf_gpt2(model, init);
  else nn::load_weights(model, init);
  params_ = model.named_parameters();
  return params_;
}

// The local loss of one step: every micro-batch's forward and backward, the
// first K-1 only accumulating (Note [Micro-batches]), each loss scaled by 1/K.
double Strategy::forward_backward(std::span<const data::Batch> micro_batches) {
  const size_t n = micro_batches.size();
  double local_loss = 0;
  for (size_t m = 0; m < n; ++m) {
    std::shared_ptr<void> local_only = m + 1 < n ? accumulate_locally() : nullptr;
    const data::Batch& batch = micro_batches[m];
    autograd::Variable loss;
    {
      trace::Scope span("forward", "compute", "compute", static_cast<int>(m));
      autograd::Variable logits = model_->forward(batch.x);                 // (B, V) or (B, T, V)
      check_logits_cover(logits.value(), data_classes_);
      loss = autograd::cross_entropy(logits, batch.y.view({-1}));           // mean over B or B·T targets
    }
    local_loss += loss.item();
    if (m + 1 == n) loss_ready(local_loss / static_cast<double>(n));
    trace::Scope span("backward", "compute", "compute", static_cast<int>(m));
    if (n == 1) loss.backward();
    else loss.backward(Tensor::full({}, 1.0f / static_cast<float>(n)));
  }
  return local_loss / static_cast<double>(n);
}

void Strategy::clip_grad_norm(float max_norm) {
  clip_scale_ = optim::clip_coefficient(optim::global_grad_norm(optim::gradient_spans(params_, false), {}), max_norm);
}

double Strategy::optimizer_step(optim::Optimizer& optimizer) {
  optimizer.step(std::exchange(clip_scale_, 1.0f));
  return 0;
}

EvalResult Strategy::evaluate(const data::Dataset& data, const EvalOptions& opts) {
  return train::evaluate(*model_, data, opts);
}

int Strategy::shard() {
  comm::ProcessGroup* world = world_group();
  return world ? world->rank() : 0;
}

int Strategy::shards() {
  comm::ProcessGroup* world = world_group();
  return world ? world->size() : 1;
}

bool Strategy::all_agree(bool mine) {
  comm::ProcessGroup* world = world_group();
  if (!world) return mine;
  Tensor t = Tensor::full({1}, mine ? 1.0f : 0.0f);
  world->all_reduce(t, {.op = comm::ReduceOp::min})->wait();
  return t.data<float>()[0] > 0;
}

nlohmann::json Strategy::layout() {
  comm::ProcessGroup* world = world_group();
  return {{"world", world ? world->size() : 1}, {"dp", replicas()}, {"pp", 1}, {"tp", 1}};
}

std::vector<ParameterHolding> Strategy::holdings(const optim::Optimizer& optimizer) const {
  std::vector<ParameterHolding> out;
  for (const auto& [name, p] : params_) {
    ParameterHolding h{.name = name, .value = p.value(), .whole = p.value().shape()};
    const bool writer = replica() == 0;
    h.weights = optimizer_sharded() ? optimizer.owned(name) : writer ? optim::ElementRange{0, p.numel()} : optim::ElementRange{};
    h.writes_state = optimizer_sharded() || writer;
    h.writes_step = writer;
    out.push_back(std::move(h));
  }
  return out;
}

std::vector<float> Strategy::next_token_logits(const Tensor& ids) {
  const Tensor logits = model_->forward(ids).value();  // (1, T, V)
  const int64_t V = logits.size(-1);
  const float* last = logits.data<float>() + (ids.size(1) - 1) * V;
  return std::vector<float>(last, last + V);
}

void Strategy::check_init_holds_only(const nn::SafetensorsReader& file, const nn::Model& model) {
  std::set<std::string> known;
  for (const nn::DeclaredParameter& d : model.declared_parameters()) known.insert(d.name);
  if (models::is_hf_gpt2(file)) return models::check_hf_gpt2_holds_only(file, known);
  for (const auto& [alias, _] : model.aliases()) known.insert(alias);
  for (const auto& [name, _] : model.named_buffers()) known.insert(name);
  std::vector<std::string> extra;
  for (const std::string& name : file.names())
    if (!known.count(name)) extra.push_back(name);
  if (extra.empty()) return;
  const std::string listed = name_list(extra, 3);
  throw Error("--init " + file.path() + " holds " + listed + ", which the model has not",
              "pass weights saved from the same model");
}

Tensor Strategy::read_init(const nn::SafetensorsReader& file, const std::map<std::string, std::string>& aliases,
                           const std::string& name) {
  if (models::is_hf_gpt2(file)) return models::read_hf_gpt2(file, name);
  if (file.contains(name)) return file.read(name);
  for (const auto& [alias, target] : aliases)
    if (target == name && file.contains(alias)) return file.read(alias);
  throw Error("--init " + file.path() + " has no tensor " + name, "pass weights saved from the same model");
}

int64_t Strategy::parameter_bytes() const {
  int64_t n = 0;
  for (const auto& [name, p] : params_) n += p.numel() * static_cast<int64_t>(dtype_size(p.value().dtype()));
  return n;
}

void Strategy::attach(optim::Optimizer&) { keep_gradients_in_place(params_); }

// Note [Gradients in place]
// Without a home of their own, a step's gradients are tensors its backward
// allocates among the activations it frees, every step, and the optimizer
// state first allocated after step 1 lands in the holes they leave. Megatron
// keeps its gradients in one contiguous buffer for that reason, as the
// data-parallel buckets here do. So a strategy without buckets keeps them in
// one buffer allocated before the first step and offers each parameter its
// slice as its gradient's destination (Note [Gradient destinations]): a
// step's first gradient is written there in place. A 50M GPT on one worker
// then held 39 MiB beyond its tensors at its peak, not 83 (the artel
// program, on tcmalloc; AMD Zen 5).
void Strategy::keep_gradients_in_place(const nn::NamedParameters& params) {
  int64_t total = 0;
  for (const auto& [name, p] : params) total += p.numel();
  {
    AllocationPurpose purpose("the gradients");
    gradients_ = Tensor::empty({total});
  }
  int64_t offset = 0;
  for (const auto& [name, p] : params) {
    autograd::Variable v = p;
    v.set_grad_destination(gradients_.slice0(offset, offset + p.numel()).view(p.shape()));
    offset += p.numel();
  }
}

int64_t Strategy::gradient_bytes() const {
  int64_t n = 0;
  for (const auto& [name, p] : params_)
    if (p.grad().defined()) n += p.grad().numel() * static_cast<int64_t>(dtype_size(p.grad().dtype()));
  return n;
}

std::vector<MemoryReport> Strategy::gather_over(comm::ProcessGroup& world, const MemoryReport& mine) {
  const std::vector<int64_t> v = mine.values();
  const auto n = static_cast<int64_t>(v.size());
  Tensor in = Tensor::empty({n}, DType::i64), all = Tensor::empty({n * world.size()}, DType::i64);
  std::copy(v.begin(), v.end(), in.data<int64_t>());
  world.all_gather(in, all)->wait();
  std::vector<MemoryReport> out;
  for (int r = 0; r < world.size(); ++r)
    out.push_back(MemoryReport::from_values({all.data<int64_t>() + r * n, all.data<int64_t>() + (r + 1) * n}));
  return out;
}

void Strategy::write_weights(const std::string& path, const std::map<std::string, std::string>& metadata) {
  if (reporter()) nn::save_weights(*model_, path, metadata);
}

}  // namespace artel::train
