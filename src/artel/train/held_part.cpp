#include "artel/train/held_part.h"

#include <map>

#include "artel/core/error.h"
#include "artel/train/checkpoint_format.h"

namespace artel::train {

namespace {

std::string state_key(const std::string& kind, const std::string& name) { return kOptimKey + kind + "." + name; }

// A replicated parameter's part is the whole tensor, however many ranks hold it.
HeldPart part_of(const ParameterHolding& h, std::string key, DType dtype, optim::ElementRange range, Tensor data) {
  const bool whole = h.split.replicated() || h.parts == 1;
  return HeldPart{std::move(key), dtype,           h.whole, whole ? nn::Split{} : h.split,
                  whole ? 0 : h.part, whole ? 1 : h.parts, range,   std::move(data)};
}

// A step count as a part: the whole of a scalar.
HeldPart step_part(const std::string& name, int64_t steps) {
  Tensor t = Tensor::empty({}, DType::i64);
  t.data<int64_t>()[0] = steps;
  return HeldPart{state_key(kStepKind, name), DType::i64, {}, nn::Split{}, 0, 1, {0, 1}, t};
}

}  // namespace

Shape HeldPart::part_shape() const { return nn::part_geometry(whole, region_split(), part, parts).shape; }

std::vector<HeldPart> parts_to_write(const std::vector<ParameterHolding>& holdings, const optim::Optimizer& optimizer) {
  std::vector<HeldPart> out;
  for (const ParameterHolding& h : holdings) {
    const Tensor flat = h.value.view({h.value.numel()});
    if (h.weights.size() > 0)
      out.push_back(part_of(h, kModelKey + h.name, DType::f32, h.weights, flat.slice0(h.weights.begin, h.weights.end)));
    const int64_t steps = optimizer.steps(h.name);
    if (steps == 0) continue;  // never updated: no state to keep
    if (h.writes_step) out.push_back(step_part(h.name, steps));
    if (!h.writes_state) continue;
    const std::vector<Tensor> buffers = optimizer.buffers(h.name);  // {} when this rank owns none of it
    for (size_t k = 0; k < buffers.size(); ++k)
      out.push_back(part_of(h, state_key(optimizer.buffer_kinds()[k], h.name), DType::f32, optimizer.owned(h.name),
                            buffers[k]));
  }
  return out;
}

std::vector<HeldPart> buffer_parts(const std::vector<std::pair<std::string, Tensor>>& buffers) {
  std::vector<HeldPart> out;
  for (const auto& [name, t] : buffers)
    out.push_back(HeldPart{kModelKey + name, t.dtype(), t.shape(), nn::Split{}, 0, 1, {0, t.numel()}, t.view({t.numel()})});
  return out;
}

std::vector<HeldPart> parts_to_read(const std::vector<ParameterHolding>& holdings, const optim::Optimizer& optimizer) {
  std::vector<HeldPart> out;
  for (const ParameterHolding& h : holdings) {
    const int64_t n = h.value.numel();
    out.push_back(part_of(h, kModelKey + h.name, DType::f32, {0, n}, h.value.view({n})));
    out.push_back(step_part(h.name, 0));
    const optim::ElementRange owned = optimizer.owned(h.name);
    if (owned.size() == 0) continue;
    for (const std::string& kind : optimizer.buffer_kinds())
      out.push_back(part_of(h, state_key(kind, h.name), DType::f32, owned, Tensor::empty({owned.size()})));
  }
  return out;
}

void load_optimizer_parts(const std::vector<HeldPart>& parts, const std::vector<bool>& found,
                          optim::Optimizer& optimizer, const std::string& source) {
  ARTEL_CHECK(parts.size() == found.size(), "load_optimizer_parts: ", parts.size(), " parts, ", found.size(), " flags");
  struct State {
    bool counted = false;  // the checkpoint holds its step count
    int64_t steps = 0;
    std::map<std::string, Tensor> buffers;  // kind -> owned elements
  };
  std::map<std::string, State> by_param;
  const std::string optim = kOptimKey, model = kModelKey;
  for (size_t i = 0; i < parts.size(); ++i) {
    const HeldPart& p = parts[i];
    if (p.key.compare(0, model.size(), model) == 0) {
      if (!found[i] && p.data.numel() > 0)  // an empty tensor has no elements to write, so no part
        throw Error("checkpoint " + source + ": no weights for parameter " + p.key.substr(model.size()),
                    "it was written for another model; start a fresh run or use another --out");
      continue;
    }
    if (p.key.compare(0, optim.size(), optim) != 0) continue;  // a strategy's own (PowerSGD's state)
    const std::string rest = p.key.substr(optim.size());
    const size_t dot = rest.find('.');
    const std::string kind = rest.substr(0, dot), name = rest.substr(dot + 1);
    State& s = by_param[name];
    if (kind == kStepKind) {
      s.counted = found[i];
      s.steps = found[i] ? p.data.data<int64_t>()[0] : 0;
    } else if (found[i]) {
      s.buffers[kind] = p.data;
    }
  }
  for (auto& [name, s] : by_param) {
    // A buffer without its step count: taken as never stepped, the buffer
    // would be dropped and the optimizer start over for this parameter.
    if (!s.counted && !s.buffers.empty())
      checkpoint_corrupt(source, "it holds " + s.buffers.begin()->first + " for " + name + " but no step count");
    std::vector<Tensor> buffers;
    if (s.steps > 0 && optimizer.owned(name).size() > 0)
      for (const std::string& kind : optimizer.buffer_kinds()) {
        auto it = s.buffers.find(kind);
        if (it == s.buffers.end())
          throw Error("checkpoint " + source + ": a step count for " + name + " but no " + kind,
                      "it was written by another optimizer; pass the same --optimizer");
        buffers.push_back(it->second);
      }
    optimizer.load_param_state(name, s.steps, std::move(buffers));
  }
}

}  // namespace artel::train
