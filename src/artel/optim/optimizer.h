// Optimizer: updates named parameters from their gradients, with PyTorch's
// semantics. Parameters come in groups (per-group lr and weight decay, as
// torch.optim param_groups); parameters without a gradient are skipped, as in
// PyTorch. Per-parameter state (momentum buffers, Adam moments, step counts)
// is exposed as named tensors — "<kind>.<parameter name>" — so a checkpoint
// stores it next to the weights and a resumed run continues bit-for-bit.
//
//   AdamW opt(decay_groups(model.named_parameters(), 1e-3f, 0.1f), {.beta2 = 0.99f});
//   loss.backward();
//   opt.set_lr(schedule.at(step));
//   opt.step();
//   opt.zero_grad();
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "artel/nn/module.h"

namespace artel::optim {

using autograd::Variable;

struct ParamGroup {
  nn::NamedParameters params;
  float lr = 1e-3f;
  float weight_decay = 0.0f;
};

// All parameters in one group.
std::vector<ParamGroup> one_group(const nn::NamedParameters& params, float lr, float weight_decay = 0.0f);
// nanoGPT's configure_optimizers: parameters with >= 2 dimensions (matmul and
// embedding weights) decay; biases and LayerNorm parameters do not. Group 0
// decays, group 1 does not; either may be empty.
std::vector<ParamGroup> decay_groups(const nn::NamedParameters& params, float lr, float weight_decay);

using OptimizerState = std::map<std::string, Tensor>;

// Elements [begin, end) of a parameter's flat values (row-major).
struct ElementRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

class Optimizer {
 public:
  // `buffer_kinds` names the f32 state tensors each parameter gets (shape of the
  // parameter), e.g. {"exp_avg", "exp_avg_sq"}.
  Optimizer(std::vector<ParamGroup> groups, std::vector<std::string> buffer_kinds);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient, read times
  // `grad_scale`: a clipping coefficient applied as the update reads each
  // gradient, which saves clipping's own pass over them (and bit for bit the
  // same as scaling the gradients first).
  void step(float grad_scale = 1.0f);
  // The same update in `batches`: lists of parameter names that together
  // name every parameter once, updated batch by batch, calling `done(i)`
  // once batch i is updated. Each parameter's update is the same in any
  // order; a sharded wrapper starts a bucket's gather from `done` while the
  // next buckets update.
  void step(float grad_scale, const std::vector<std::vector<std::string>>& batches,
            const std::function<void(size_t batch)>& done);
  void zero_grad();
  void set_lr(float lr);                // every group (what an LR schedule does)
  void set_lr(size_t group, float lr);  // one group
  // Read-only: the parameter lists are fixed at construction (state follows them).
  const std::vector<ParamGroup>& param_groups() const { return groups_; }

  // A sharded update (ZeRO stage 1, DistributedDataParallel): from now on
  // step() writes only `owned[name]` of each parameter, and the state holds
  // only those elements (ZeRO's 8Ψ/N of AdamW state); the other elements
  // belong to other ranks, which update them and send the new values. Every
  // parameter must be named (an empty range updates nothing and holds no
  // state). Step counts still advance for every parameter with a gradient,
  // so the ranks' parts put together are the unsharded state. The update is
  // elementwise, so the result is bit-identical to step().
  // Stages that keep only their part of a tensor name it per parameter, as a
  // flat tensor of the owned elements: `grads` (ZeRO stage 2 and 3) the
  // gradient step() reads instead of the parameter's (the parameter then
  // always counts as having one), `values` (stage 3, where a whole value
  // exists only while gathered) what step() updates instead of the parameter.
  void shard(const std::map<std::string, ElementRange>& owned, const std::map<std::string, Tensor>& values = {},
             const std::map<std::string, Tensor>& grads = {});
  // Called first by every step(), to throw when the gradients it would read
  // are not ready: a wrapper that reduces them into `grads` above (FSDP)
  // refuses a step its reductions have not finished, where the user calls
  // step() and no wrapper sits between.
  void set_step_check(std::function<void()> check) { step_check_ = std::move(check); }
  // The state tensors of one parameter ({} before its first update, or
  // owning nothing), in buffer_kinds() order: flat, the owned elements only;
  // they alias the optimizer's own.
  std::vector<Tensor> buffers(const std::string& name) const;
  // The elements of `name` this optimizer updates and keeps state for.
  ElementRange owned(const std::string& name) const;
  const std::vector<std::string>& buffer_kinds() const { return kinds_; }

  // "step.<name>" (int64, shape {}) and "<kind>.<name>" (the parameter's
  // shape) for every parameter updated so far. Sharded: elements outside the
  // owned range are zeros (DistributedDataParallel::gather_optimizer_state
  // fills them from the other ranks).
  OptimizerState state_dict() const;
  // Bytes of state this optimizer holds: its buffers, which a parameter gets
  // at its first update (a sharded step never updates, so never allocates
  // for, parameters wholly outside this rank's block).
  int64_t state_bytes() const;
  // Replaces the state with whole tensors as state_dict() writes them (a
  // sharded optimizer keeps its owned elements); checks names, shapes and
  // dtypes first and names what is wrong.
  void load_state_dict(const OptimizerState& state);

  // One parameter's state at a time, as a sharded checkpoint stores it (never
  // the whole state at once): its step count (0 before its first update) and
  // its buffers in buffer_kinds() order, each the owned elements only, flat
  // ({} when the count is 0 or nothing is owned).
  int64_t steps(const std::string& name) const;
  // Replaces that state with `steps` and `owned_buffers` (taken as they are);
  // checks the count, sizes and dtypes and names what is wrong.
  void load_param_state(const std::string& name, int64_t steps, std::vector<Tensor> owned_buffers);

 protected:
  struct Slot {
    std::string name;
    Variable param;
    size_t group;
    int64_t steps = 0;            // updates done so far (PyTorch's per-parameter state["step"])
    std::vector<Tensor> buffers;  // empty until the first update
    ElementRange owned;           // the elements step() updates (all, unless shard() said otherwise)
    Tensor value;                 // when defined: the owned elements, flat, updated instead of the parameter's
    Tensor grad;                  // when defined: the owned elements' gradient, read instead of the parameter's
  };
  // Updates the owned elements of one parameter (never none): `value` and
  // `grad` point at them, slot.owned.size() each. slot.steps is already
  // incremented and buffers exist (zero-filled on the first update; `first`
  // says so). The gradient counts as grad[i] · grad_scale, rounded to float.
  virtual void update(Slot& slot, const ParamGroup& group, float* value, const float* grad, float grad_scale,
                      bool first) = 0;

 private:
  void update_slot(Slot& s, float grad_scale);

  std::vector<ParamGroup> groups_;
  std::vector<std::string> kinds_;
  std::vector<Slot> slots_;
  std::function<void()> step_check_;
};

}  // namespace artel::optim
