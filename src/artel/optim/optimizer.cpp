#include "artel/optim/optimizer.h"
#include "artel/core/memory_stats.h"

#include <algorithm>
#include <map>
#include <set>

namespace artel::optim {

namespace {

// A whole tensor of `shape` from the state of elements `owned` (flat): a
// view when the range is everything, else zeros around a copy.
Tensor spread(const Tensor& part, ElementRange owned, const Shape& shape) {
  if (owned.begin == 0 && owned.end == shape_numel(shape)) return part.view(shape);
  Tensor whole = Tensor::zeros(shape);
  std::copy(part.data<float>(), part.data<float>() + part.numel(), whole.data<float>() + owned.begin);
  return whole;
}

}  // namespace

std::vector<ParamGroup> one_group(const nn::NamedParameters& params, float lr, float weight_decay) {
  return {ParamGroup{params, lr, weight_decay}};
}

std::vector<ParamGroup> decay_groups(const nn::NamedParameters& params, float lr, float weight_decay) {
  ParamGroup decay{{}, lr, weight_decay}, no_decay{{}, lr, 0.0f};
  for (const auto& np : params) (np.second.value().dim() >= 2 ? decay : no_decay).params.push_back(np);
  return {decay, no_decay};
}

Optimizer::Optimizer(std::vector<ParamGroup> groups, std::vector<std::string> buffer_kinds)
    : groups_(std::move(groups)), kinds_(std::move(buffer_kinds)) {
  std::set<std::string> names;
  std::map<const autograd::VariableImpl*, std::string> tensors;  // one slot a tensor, or it is stepped twice
  for (size_t g = 0; g < groups_.size(); ++g) {
    ARTEL_CHECK(groups_[g].lr >= 0, "optimizer: group ", g, " has a negative learning rate ", groups_[g].lr);
    ARTEL_CHECK(groups_[g].weight_decay >= 0, "optimizer: group ", g, " has a negative weight decay ",
                groups_[g].weight_decay);
    for (const auto& [name, p] : groups_[g].params) {
      ARTEL_CHECK(p.defined() && p.value().dtype() == DType::f32, "optimizer: parameter '", name,
                  "' is not a float32 tensor");
      ARTEL_CHECK(names.insert(name).second, "optimizer: parameter '", name, "' appears twice",
                  " (hint: each parameter belongs to one group)");
      const auto [earlier, fresh] = tensors.emplace(p.impl(), name);
      ARTEL_CHECK(fresh, "optimizer: parameter '", name, "' is the tensor of '", earlier->second,
                  "' again (one module registered under two names?), and would be stepped twice",
                  " (hint: list each tensor once; tie weights with register_alias)");
      slots_.push_back(Slot{name, p, g, 0, {}, {0, p.numel()}, Tensor(), Tensor()});
    }
  }
}

void Optimizer::step(float grad_scale) {
  if (step_check_) step_check_();
  autograd::NoGradGuard no_grad;
  for (Slot& s : slots_) update_slot(s, grad_scale);
}

void Optimizer::step(float grad_scale, const std::vector<std::vector<std::string>>& batches,
                     const std::function<void(size_t batch)>& done) {
  std::map<std::string, size_t> slot_named;
  for (size_t i = 0; i < slots_.size(); ++i) slot_named[slots_[i].name] = i;
  std::vector<std::vector<size_t>> order(batches.size());
  std::vector<bool> named(slots_.size(), false);
  for (size_t b = 0; b < batches.size(); ++b)
    for (const std::string& name : batches[b]) {
      const auto it = slot_named.find(name);
      ARTEL_CHECK(it != slot_named.end(), "optimizer: step() in batches names '", name, "', which it does not update");
      ARTEL_CHECK(!named[it->second], "optimizer: step() in batches names '", name, "' twice");
      named[it->second] = true;
      order[b].push_back(it->second);
    }
  for (size_t i = 0; i < slots_.size(); ++i)
    ARTEL_CHECK(named[i], "optimizer: step() in batches leaves out '", slots_[i].name, "'");
  if (step_check_) step_check_();
  autograd::NoGradGuard no_grad;
  for (size_t b = 0; b < order.size(); ++b) {
    for (size_t i : order[b]) update_slot(slots_[i], grad_scale);
    done(b);
  }
}

void Optimizer::update_slot(Slot& s, float grad_scale) {
  const Tensor& grad = s.grad.defined() ? s.grad : s.param.grad();
  if (!grad.defined()) return;
  const bool whole = !s.grad.defined();
  ARTEL_CHECK(!whole || (grad.numel() == s.param.numel() && grad.dtype() == DType::f32), "optimizer: gradient of '",
              s.name, "' has shape ", shape_str(grad.shape()), ", parameter has ", shape_str(s.param.shape()));
  ++s.steps;
  if (s.owned.size() == 0) return;  // another rank's: no state here
  bool first = s.buffers.empty();
  if (first) {
    AllocationPurpose purpose("the optimizer state");
    for (size_t k = 0; k < kinds_.size(); ++k) s.buffers.push_back(Tensor::zeros({s.owned.size()}));
  }
  float* value = s.value.defined() ? s.value.data<float>() : s.param.value().data<float>() + s.owned.begin;
  update(s, groups_[s.group], value, grad.data<float>() + (whole ? s.owned.begin : 0), grad_scale, first);
}

void Optimizer::shard(const std::map<std::string, ElementRange>& owned, const std::map<std::string, Tensor>& values,
                      const std::map<std::string, Tensor>& grads) {
  // A flat f32 tensor of the owned elements of `s`, or undefined when `parts` names none.
  auto part_of = [](const std::map<std::string, Tensor>& parts, const std::string& name, ElementRange r,
                    const char* what) {
    auto it = parts.find(name);
    if (it == parts.end()) return Tensor();
    ARTEL_CHECK(it->second.numel() == r.size() && it->second.dtype() == DType::f32, "optimizer: shard() ", what,
                " of '", name, "' has ", it->second.numel(), " elements, it owns ", r.size());
    return it->second;
  };
  ARTEL_CHECK(owned.size() == slots_.size(), "optimizer: shard() got ranges for ", owned.size(), " parameters, it has ",
              slots_.size());
  for (Slot& s : slots_) {
    auto it = owned.find(s.name);
    ARTEL_CHECK(it != owned.end(), "optimizer: shard() got no range for parameter '", s.name, "'");
    const ElementRange r = it->second;
    ARTEL_CHECK(0 <= r.begin && r.begin <= r.end && r.end <= s.param.numel(), "optimizer: shard() range [", r.begin,
                ", ", r.end, ") of '", s.name, "' is outside its ", s.param.numel(), " elements");
    std::vector<Tensor> whole;  // state already there: re-cut to the new range
    for (const Tensor& b : s.buffers) whole.push_back(spread(b, s.owned, s.param.shape()));
    s.owned = r;
    s.value = part_of(values, s.name, r, "value");
    s.grad = part_of(grads, s.name, r, "gradient");
    s.buffers.clear();
    if (r.size() > 0)
      for (const Tensor& w : whole) s.buffers.push_back(w.view({-1}).slice0(r.begin, r.end).clone());
  }
}

ElementRange Optimizer::owned(const std::string& name) const {
  for (const Slot& s : slots_)
    if (s.name == name) return s.owned;
  throw Error("optimizer: no parameter '" + name + "'");
}

std::vector<Tensor> Optimizer::buffers(const std::string& name) const {
  for (const Slot& s : slots_)
    if (s.name == name) return s.buffers;
  throw Error("optimizer: no parameter '" + name + "'");
}

void Optimizer::zero_grad() {
  for (Slot& s : slots_) s.param.zero_grad();
}

void Optimizer::set_lr(float lr) {
  ARTEL_CHECK(lr >= 0, "optimizer: negative learning rate ", lr);
  for (auto& g : groups_) g.lr = lr;
}

void Optimizer::set_lr(size_t group, float lr) {
  ARTEL_CHECK(lr >= 0, "optimizer: negative learning rate ", lr);
  ARTEL_CHECK(group < groups_.size(), "optimizer: no parameter group ", group, " (it has ", groups_.size(), ")");
  groups_[group].lr = lr;
}

int64_t Optimizer::state_bytes() const {
  int64_t n = 0;
  for (const Slot& s : slots_)
    for (const Tensor& b : s.buffers) n += b.numel() * static_cast<int64_t>(dtype_size(b.dtype()));
  return n;
}

OptimizerState Optimizer::state_dict() const {
  OptimizerState out;
  for (const Slot& s : slots_) {
    if (s.steps == 0) continue;
    Tensor step = Tensor::empty({}, DType::i64);
    step.data<int64_t>()[0] = s.steps;
    out["step." + s.name] = step;
    for (size_t k = 0; k < kinds_.size(); ++k)
      out[kinds_[k] + "." + s.name] = s.buffers.empty() ? Tensor::zeros(s.param.shape())
                                                        : spread(s.buffers[k], s.owned, s.param.shape());
  }
  return out;
}

void Optimizer::load_state_dict(const OptimizerState& state) {
  std::set<std::string> used;
  std::vector<std::pair<int64_t, std::vector<Tensor>>> next(slots_.size());
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    auto it = state.find("step." + s.name);
    if (it == state.end()) continue;
    used.insert(it->first);
    ARTEL_CHECK(it->second.dtype() == DType::i64 && it->second.numel() == 1, "optimizer state: '", it->first,
                "' must be one int64");
    next[i].first = it->second.data<int64_t>()[0];
    ARTEL_CHECK(next[i].first > 0, "optimizer state: '", it->first, "' is ", next[i].first, ", must be positive");
    for (const std::string& kind : kinds_) {
      std::string key = kind + "." + s.name;
      auto b = state.find(key);
      ARTEL_CHECK(b != state.end(), "optimizer state: missing '", key, "' (it has a step count but no ", kind, ")");
      ARTEL_CHECK(b->second.dtype() == DType::f32 && b->second.shape() == s.param.shape(), "optimizer state: '", key,
                  "' has ", dtype_name(b->second.dtype()), " ", shape_str(b->second.shape()), ", expected float32 ",
                  shape_str(s.param.shape()));
      used.insert(key);
      if (s.owned.size() > 0) next[i].second.push_back(b->second.view({-1}).slice0(s.owned.begin, s.owned.end).clone());
    }
  }
  for (const auto& [key, _] : state)
    ARTEL_CHECK(used.count(key), "optimizer state: unexpected '", key,
                "' (hint: the state was saved for a different model or optimizer)");
  for (size_t i = 0; i < slots_.size(); ++i) {
    slots_[i].steps = next[i].first;
    slots_[i].buffers = std::move(next[i].second);
  }
}

int64_t Optimizer::steps(const std::string& name) const {
  for (const Slot& s : slots_)
    if (s.name == name) return s.steps;
  throw Error("optimizer: no parameter '" + name + "'");
}

void Optimizer::load_param_state(const std::string& name, int64_t steps, std::vector<Tensor> owned_buffers) {
  auto slot = std::find_if(slots_.begin(), slots_.end(), [&](const Slot& s) { return s.name == name; });
  ARTEL_CHECK(slot != slots_.end(), "optimizer state: no parameter '", name, "'");
  ARTEL_CHECK(steps >= 0, "optimizer state: step count of '", name, "' is ", steps, ", must be >= 0");
  const bool holds = steps > 0 && slot->owned.size() > 0;
  ARTEL_CHECK(owned_buffers.size() == (holds ? kinds_.size() : 0), "optimizer state: '", name, "' got ",
              owned_buffers.size(), " buffers, expected ", holds ? kinds_.size() : 0);
  for (size_t k = 0; k < owned_buffers.size(); ++k) {
    const Tensor& b = owned_buffers[k];
    ARTEL_CHECK(b.defined() && b.dtype() == DType::f32 && b.numel() == slot->owned.size(), "optimizer state: ",
                kinds_[k], " of '", name, "' has ", b.defined() ? b.numel() : 0, " elements, this rank owns ",
                slot->owned.size());
    owned_buffers[k] = b.view({slot->owned.size()});
  }
  slot->steps = steps;
  slot->buffers = std::move(owned_buffers);
}

}  // namespace artel::optim
