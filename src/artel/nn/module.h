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
//   materialize(block, /*seed=*/1337);                        // allocate and draw every parameter
//   for (auto& [name, p] : block.named_parameters()) ...   // "fc.weight", "fc.bias"
//   block.load_state_dict(other.state_dict());
//
// Note [Declared parameters]
// A layer declares its parameters — name, whole shape, how they start
// (nn/init.h) — without storage; materialize() then allocates and draws
// them. The split is deliberate: a parameter's values come from the stream
// of its whole-model name (stream_of) and each element from its own counter,
// which are known only once the module sits in its model, and a worker that
// holds a shard (parallel/) allocates and draws only that shard, never the
// whole model, yet gets exactly the values the whole model holds there. A
// parameter given a value at registration (register_parameter with a
// Tensor) is already materialised.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "artel/autograd/variable.h"
#include "artel/core/tensor.h"
#include "artel/nn/init.h"

namespace artel::nn {

using autograd::Variable;

// Name -> tensor. A module's state dict shares storage with the module (clone to snapshot).
using StateDict = std::map<std::string, Tensor>;
using NamedParameters = std::vector<std::pair<std::string, Variable>>;

// A parameter as declared: its whole shape and how it starts (Note [Declared parameters]).
struct DeclaredParameter {
  std::string name;
  Variable param;       // its value is undefined until materialised (or a shard of `shape`)
  Shape shape;          // of the whole parameter
  std::optional<Init> init;  // empty: given a value at registration
};

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Own parameters first, then each submodule's, recursively, in registration order.
  NamedParameters named_parameters() const;
  std::vector<Variable> parameters() const;
  std::vector<DeclaredParameter> declared_parameters() const;  // same order, with shapes and inits
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  int64_t num_parameters() const;  // elements of the whole parameters, not tensors
  // Submodules by dotted path ("transformer.h.0.attn"), depth first, this module as "".
  std::vector<std::pair<std::string, Module*>> named_modules();

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
  // A parameter of this shape, without storage until materialize() (Note [Declared parameters]).
  Variable declare_parameter(const std::string& name, Shape shape, Init init);
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
  void collect_declared(const std::string& prefix, std::vector<DeclaredParameter>& out) const;
  void collect_modules(const std::string& prefix, std::vector<std::pair<std::string, Module*>>& out);
  void collect_buffers(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const;
  void collect_aliases(const std::string& prefix, std::map<std::string, std::string>& out) const;

  NamedParameters params_;
  std::vector<std::pair<Shape, std::optional<Init>>> declared_;  // per parameter, as params_
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::vector<std::pair<std::string, std::string>> aliases_;
  bool training_ = true;
};

// Allocates and draws every parameter of `module` that has no value yet:
// element e of parameter `name` is Init's draw e of stream (seed,
// stream_of(name)). Parameters that have values are left alone.
void materialize(Module& module, uint64_t seed);

// Eval mode while it lives, then the module's mode before it, even on an error.
class EvalMode {
 public:
  explicit EvalMode(Module& m) : m_(m), training_(m.is_training()) { m.eval(); }
  ~EvalMode() { m_.train(training_); }
  EvalMode(const EvalMode&) = delete;
  EvalMode& operator=(const EvalMode&) = delete;

 private:
  Module& m_;
  bool training_;
};

}  // namespace artel::nn
