// Variable: a Tensor that takes part in reverse-mode automatic differentiation.
//
// Ops on Variables (ops.h) record a graph as they run: the result of an op
// whose inputs need gradients points at a Node that knows the op's backward.
// backward() walks the graph in reverse topological order; gradients
// accumulate on leaves (parameters) until zero_grad(). A grad-ready hook on a
// leaf fires when its gradient is final for the current backward — data
// parallelism starts its all-reduces from there.
//
//   Variable w(Tensor::zeros({out, in}), /*requires_grad=*/true);
//   Variable loss = mean(relu(linear(x, w, b)));
//   loss.backward();            // w.grad() now holds dloss/dw
//   { NoGradGuard g; ... }      // ops inside record nothing
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "artel/core/tensor.h"

namespace artel::autograd {

class Node;
class Variable;

using GradReadyHook = std::function<void(Variable&)>;

// Note [Row gradients]: a lookup's gradient for its table touches only the
// rows it read. A leaf with a row sink (set_row_gradient_sink) that also
// gets dense gradients in the same backward (a table tied to a language
// model's head) gets the lookup's part apart: the engine hands the sink
// `ids` and the gradient of each looked-up row, instead of adding them into
// grad(), and the leaf's grad-ready hooks fire once its dense part is final.
// The head's backward runs first and the lookup's last, so data parallelism
// can reduce the table's dense gradient while the rest of backward runs and
// only the rows at its end. Without dense gradients (an untied table) the
// rows go into grad() as usual, unless the sink takes only rows (a sparse
// table, PyTorch's nn.Embedding(sparse=True)): then every lookup's rows go
// to the sink, grad() is left as it was, and the hooks fire once the last
// lookup has handed its rows over.
struct RowGradient {
  const Tensor& ids;    // the ids looked up, any shape
  int64_t first_row;    // the id of the table's first row (a vocabulary-parallel shard's)
  const Tensor& grad;   // (ids..., C): the gradient of each looked-up row
};
using RowGradientSink = std::function<void(const RowGradient&)>;

struct VariableImpl {
  Tensor value;
  Tensor grad;                 // undefined until the first backward reaches it
  bool grad_owned = false;     // false: `grad` may alias a tensor of the graph; copy before adding into it
  bool requires_grad = false;
  std::shared_ptr<Node> grad_fn;  // null for leaves
  std::vector<std::pair<uint64_t, GradReadyHook>> hooks;  // (handle, hook)
  Tensor grad_destination;     // leaves: where a backward may write a fresh gradient (Note [Gradient destinations])
  Tensor rounded;              // op results: the value rounded to bf16, when its op made it (Note [Rounded values])
  std::function<Tensor()> remake;  // op results: makes the value again (Note [Values made again]); empty: none
  RowGradientSink row_sink;    // leaves: where a lookup's rows go apart (Note [Row gradients]); empty: none
  bool rows_only = false;      // the sink takes the rows of an untied table too (a sparse table)
};

class Variable {
 public:
  Variable() = default;
  explicit Variable(Tensor value, bool requires_grad = false);

  bool defined() const { return impl_ != nullptr; }
  const Tensor& value() const { return impl_->value; }
  Tensor& value() { return impl_->value; }
  const Shape& shape() const { return impl_->value.shape(); }
  int64_t size(int64_t d) const { return impl_->value.size(d); }
  int64_t numel() const { return impl_->value.numel(); }
  float item() const { return impl_->value.item(); }

  bool requires_grad() const { return impl_->requires_grad; }
  void set_requires_grad(bool r);
  bool is_leaf() const { return impl_->grad_fn == nullptr; }
  const std::shared_ptr<Node>& grad_fn() const { return impl_->grad_fn; }

  // The accumulated gradient (undefined before any backward reached this leaf).
  const Tensor& grad() const { return impl_->grad; }
  void set_grad(Tensor g);  // replaces the gradient (e.g. with an averaged one)
  void zero_grad();         // drops the gradient (PyTorch's set_to_none)

  // Adds a hook that fires once per backward, when this leaf's gradient is
  // final; returns its handle. Whoever adds a hook that points at itself
  // removes it before it goes (DDP and FSDP do): a parameter outlives them.
  uint64_t add_grad_ready_hook(GradReadyHook hook);
  void remove_grad_ready_hook(uint64_t handle);

  // Note [Gradient destinations]: memory of this leaf's shape (undefined to
  // clear) into which a backward writes the leaf's gradient when it has none
  // yet, instead of a fresh tensor; grad() then is that memory. Data
  // parallelism points it at the leaf's slice of an all-reduce bucket, so
  // gradients land where they are reduced, with no copy (PyTorch DDP's
  // gradient_as_bucket_view). Ops opt in per input (grad_output_buffer in
  // ops.h); for the others the engine falls back to its usual tensors.
  void set_grad_destination(Tensor destination);

  // Note [Row gradients]: where this leaf's lookups put their rows when it
  // also gets dense gradients, or always when `rows_only` (a sparse table);
  // an empty function clears it.
  void set_row_gradient_sink(RowGradientSink sink, bool rows_only = false);

  // Backpropagates from this scalar (seed 1) or with the given output gradient.
  void backward() const;
  void backward(const Tensor& grad_output) const;

  // Note [Rounded values]: an op may hand its result over with the value
  // already rounded to bf16, made while the value was in cache, for the bf16
  // product that reads it next (a linear layer's input), which would
  // otherwise round it again from memory. Only an op sets it, on its own
  // result, whose value nothing writes afterwards. Undefined when none.
  const Tensor& rounded() const { return impl_->rounded; }
  void set_rounded(Tensor bits);

  // Note [Values made again]: an op whose result is cheaper to make again
  // than to keep until backward (sequence parallelism's gather of the
  // tokens, Megatron's) hands over how to make it; an op that would keep
  // the value for its backward (a linear layer's dW) keeps this instead and
  // makes it again there. Empty when none.
  const std::function<Tensor()>& remake() const { return impl_->remake; }
  void set_remake(std::function<Tensor()> remake) { impl_->remake = std::move(remake); }

  // The same value, cut from the graph.
  Variable detach() const { return Variable(impl_->value, false); }

  VariableImpl* impl() const { return impl_.get(); }

 private:
  friend Variable make_result(Tensor, std::vector<Variable>, const char*, std::function<void(const Tensor&, std::vector<Tensor>&)>);
  std::shared_ptr<VariableImpl> impl_;
};

// A recorded op: its inputs (the graph's edges) and its backward.
class Node {
 public:
  using BackwardFn = std::function<void(const Tensor& grad_output, std::vector<Tensor>& grad_inputs)>;
  Node(const char* name, std::vector<Variable> inputs, BackwardFn fn)
      : name_(name), inputs_(std::move(inputs)), backward_(std::move(fn)) {}

  const char* name() const { return name_; }
  const std::vector<Variable>& inputs() const { return inputs_; }
  // Note [Adding into a gradient]: an op whose backward adds its input
  // gradients into what grad_inputs[i] holds when it arrives defined (a
  // scatter, like embedding's) may be offered a leaf's gradient so far, if
  // the leaf's alone, instead of a fresh tensor that would be summed with it
  // afterwards: a tied embedding table then skips a (V, C) zero fill and sum.
  // A leaf with no gradient yet but a destination (Note [Gradient
  // destinations]) is offered its destination zeroed: the sum lands in place.
  void set_adds_into_gradients() { adds_into_ = true; }
  bool adds_into_gradients() const { return adds_into_; }
  // Note [Row gradients]: input i is a table this op reads rows of; its
  // backward hands them to row_gradient_sink() when that is set.
  void set_row_gradient_input(int i) { row_input_ = i; }
  int row_gradient_input() const { return row_input_; }
  // Fills grad_inputs[i] for every input that needs a gradient; leaves the
  // others undefined. grad_inputs[i] arrives undefined, or holding a leaf's
  // gradient destination, which the op may write into (grad_output_buffer),
  // or its gradient so far, which the op may add onto (grad_sum_buffer; Note
  // [Adding a product onto a gradient]); it may also replace either. Must not
  // modify grad_output, except through reusable_grad().
  void backward(const Tensor& grad_output, std::vector<Tensor>& grad_inputs) const { backward_(grad_output, grad_inputs); }

 private:
  const char* name_;
  std::vector<Variable> inputs_;
  BackwardFn backward_;
  bool adds_into_ = false;
  int row_input_ = -1;
};

// For op authors: wraps `value` as the op's result. When grad mode is on and an
// input requires a gradient, records a Node with `backward`; otherwise the
// result is a plain leaf that needs no gradient.
Variable make_result(Tensor value, std::vector<Variable> inputs, const char* name, Node::BackwardFn backward);

// For backward functions: the tensor to write input i's gradient into — the
// destination the engine left in grad_inputs[i] (Note [Gradient destinations]),
// or a fresh one of `shape`. The op must overwrite all of it.
Tensor& grad_output_buffer(std::vector<Tensor>& grad_inputs, size_t i, const Shape& shape);

// Note [Adding a product onto a gradient]: when a leaf already holds a
// gradient (a later micro-batch, an accumulation step, a weight used twice),
// the engine offers it to the next op that reaches the leaf. An op whose
// gradient is a product (a linear layer's dW = dYᵀ·X) adds onto it with
// beta 1 in the GEMM, instead of a fresh (out, in) tensor summed afterwards:
// the fresh one was GPT-2's 154 MiB lm_head gradient on top of a pipeline
// stage's peak. grad_sum_buffer gives that tensor, with beta 1, or, when
// nothing was offered, grad_output_buffer's with beta 0; the op computes
// beta · buffer + its gradient. grad_output_buffer never hands out a sum so
// far, so ops that only write are unaffected.
Tensor& grad_sum_buffer(std::vector<Tensor>& grad_inputs, size_t i, const Shape& shape, float& beta);

// For backward functions of ops that read rows of a table (Note [Row
// gradients]): the sink of the table's rows when the engine keeps them
// apart in this backward, else null (add them into the table's gradient).
const RowGradientSink* row_gradient_sink();

// For backward functions: grad_output itself when the engine holds the only
// reference to its storage (nobody else can see it), so an elementwise op may
// overwrite it with its input's gradient; else a fresh tensor of its shape.
// Saves a buffer, and the cache misses of writing to new memory.
Tensor reusable_grad(const Tensor& grad_output);

// True when input i of the op being recorded needs a gradient (for backward
// functions: skip work whose result nobody needs).
inline bool needs_grad(const Variable& v) { return v.defined() && v.requires_grad(); }

bool grad_enabled();

// Within its scope, ops record no graph (evaluation, optimizer updates).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace artel::autograd
