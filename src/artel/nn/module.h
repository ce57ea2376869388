// Module: a piece of a model that owns named parameters (and buffers) and
// submodules, in a fixed registration order. Names are dotted paths, as in
// PyTorch (`transformer.h.3.attn.c_attn.weight`), so checkpoints, optimizers
// and error messages can all name a tensor; the order is what data parallelism
// buckets by and what an optimizer's state follows.
//
//   class Block : public Module {
//    public:
//     explicit Block(Rng& rng) { fc_ = register_module("fc", std::make_shared<Linear>(4, 4, true, rng)); }
//   };
//   for (auto& [name, p] : block.named_parameters()) ...   // "fc.weight", "fc.bias"
//   block.load_state_dict(other.state_dict());
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "artel/autograd/variable.h"
#include "artel/core/tensor.h"

namespace artel::nn {

using autograd::Variable;

// Name -> tensor. A module's state dict shares storage with the module (clone to snapshot).
using StateDict = std::map<std::string, Tensor>;
using NamedParameters = std::vector<std::pair<std::string, Variable>>;

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Own parameters first, then each submodule's, recursively, in registration order.
  NamedParameters named_parameters() const;
  std::vector<Variable> parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  int64_t num_parameters() const;  // elements, not tensors

  // Parameters and buffers by name. Aliases (tied weights) are not included.
  StateDict state_dict() const;
  // Copies values into the existing tensors (parameter identity is kept, so an
  // optimizer built on this module stays valid). Checks everything first and
  // throws one Error naming every missing / unexpected / wrongly shaped tensor;
  // non-strict ignores missing and unexpected names, never wrong shapes.
  // An alias (e.g. lm_head.weight) is accepted in place of its target, or next
  // to it when the two hold the same values.
  void load_state_dict(const StateDict& state, bool strict = true);

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad();  // drops every parameter's gradient (set_to_none)

  // Alias name -> the name of the tensor it shares, with dotted prefixes.
  std::map<std::string, std::string> aliases() const;

 protected:
  Variable register_parameter(const std::string& name, Tensor value, bool requires_grad = true);
  Tensor register_buffer(const std::string& name, Tensor value);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }
  // `alias` names the same tensor as `target` (both relative to this module):
  // how tied weights are written once and still load under either name.
  void register_alias(const std::string& alias, const std::string& target);

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void check_new_name(const std::string& name) const;
  void collect_parameters(const std::string& prefix, NamedParameters& out) const;
  void collect_buffers(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const;
  void collect_aliases(const std::string& prefix, std::map<std::string, std::string>& out) const;

  NamedParameters params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::vector<std::pair<std::string, std::string>> aliases_;
  bool training_ = true;
};

}  // namespace artel::nn
