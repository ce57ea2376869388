// Sequential: layers applied in order, named by their index ("0", "1", ...)
// as torch.nn.Sequential names them, so `net.0.weight` means the same in both.
//
//   auto net = std::make_shared<Sequential>();
//   net->add(std::make_shared<Linear>(784, 512, true, rng));
//   net->add(std::make_shared<ReLU>());
//   Variable y = net->forward(x);
#pragma once

#include <memory>
#include <vector>

#include "artel/nn/layer.h"

namespace artel::nn {

class Sequential : public Layer {
 public:
  Sequential() = default;
  explicit Sequential(std::vector<std::shared_ptr<Layer>> layers);
  void add(std::shared_ptr<Layer> layer);
  Variable forward(const Variable& x) override;

  size_t size() const { return layers_.size(); }
  Layer& operator[](size_t i) const { return *layers_.at(i); }

 private:
  std::vector<std::shared_ptr<Layer>> layers_;
};

// ModuleList: submodules named by index, for repeated blocks of one type
// (`transformer.h.0`, `transformer.h.1`, ...).
template <class M>
class ModuleList : public Module {
 public:
  void add(std::shared_ptr<M> m) { items_.push_back(register_module(std::to_string(items_.size()), std::move(m))); }
  size_t size() const { return items_.size(); }
  M& operator[](size_t i) const { return *items_.at(i); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<std::shared_ptr<M>> items_;
};

}  // namespace artel::nn
