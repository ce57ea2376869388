// The backward engine: reverse topological order over the recorded graph.
//
// Note [Gradient ownership]: an op's backward may hand back its grad_output
// itself, or a view of it, for several inputs (add returns g for both). So a
// gradient received from the graph is "borrowed": it is stored as is the first
// time and copied before anything is added into it in place — unless by then
// the stored tensor is the only one left holding its storage.
#include <unordered_map>
#include <unordered_set>

#include "artel/autograd/op_span.h"
#include "artel/autograd/variable.h"
#include "artel/kernels/accumulate.h"

namespace artel::autograd {
namespace {

struct Slot {
  Tensor grad;
  bool owned = false;
};

void accumulate(Tensor& into, bool& owned, const Tensor& g) {
  if (!into.defined()) {
    into = g;
    owned = false;
    return;
  }
  ARTEL_CHECK(into.numel() == g.numel(), "backward: gradient of shape ", shape_str(g.shape()),
              " where ", shape_str(into.shape()), " was expected");
  // A borrowed gradient that nothing else holds any more is ours after all.
  owned = owned || into.storage().use_count() == 1;
  if (!owned) {  // the first sum goes to a fresh tensor: one pass, no copy first
    Tensor sum = Tensor::empty(into.shape());
    kernels::add_to(sum.data<float>(), into.data<float>(), g.data<float>(), g.numel());
    into = std::move(sum);
    owned = true;
    return;
  }
  kernels::add_into(into.data<float>(), g.data<float>(), g.numel());
}

// The storage of the gradients so far offered to the node whose backward
// runs on this thread (Note [Adding a product onto a gradient]); saved and
// restored around each node, since a checkpoint's backward runs an inner one.
thread_local const std::vector<const void*>* offered_sums = nullptr;

// The row sink of the table whose rows the node running on this thread
// hands over (Note [Row gradients]); saved and restored like offered_sums.
thread_local const RowGradientSink* current_row_sink = nullptr;

bool offered_as_sum(const Tensor& t) {
  if (!offered_sums || !t.defined()) return false;
  for (const void* p : *offered_sums)
    if (p == t.raw()) return true;
  return false;
}

// What the engine leaves in a node's gradient slots, for a leaf that is its
// input once (two slots would share one tensor):
//  - the leaf's gradient so far, when only the leaf holds it: a node that adds
//    into its slots (Note [Adding into a gradient]) adds onto it, any other
//    may add its product onto it (Note [Adding a product onto a gradient]);
//  - else its destination, if it has one (Note [Gradient destinations]),
//    zeroed for a node that adds into its slots.
// A table whose rows go apart (`apart`, Note [Row gradients]) is offered nothing.
void offer_slots(const Node& node, int apart, std::vector<Tensor>& grads, std::vector<const void*>& sums) {
  const auto& inputs = node.inputs();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Variable& in = inputs[i];
    if (!needs_grad(in) || !in.is_leaf() || static_cast<int>(i) == apart) continue;
    VariableImpl* leaf = in.impl();
    bool twice = false;
    for (size_t j = 0; j < inputs.size(); ++j) twice |= j != i && inputs[j].defined() && inputs[j].impl() == leaf;
    if (twice) continue;
    if (leaf->grad.defined()) {
      if (!leaf->grad_owned && leaf->grad.storage().use_count() != 1) continue;
      grads[i] = leaf->grad;
      sums.push_back(leaf->grad.raw());
    } else if (leaf->grad_destination.defined()) {
      grads[i] = leaf->grad_destination;
      if (node.adds_into_gradients()) grads[i].zero();
    }
  }
}

// Runs one node's backward with its offered sums visible to grad_sum_buffer.
void run_backward(const Node& node, const Tensor& g, std::vector<Tensor>& grads, const std::vector<const void*>& sums,
                  const RowGradientSink* rows) {
  struct Offered {
    const std::vector<const void*>* outer = offered_sums;
    const RowGradientSink* outer_rows = current_row_sink;
    ~Offered() { offered_sums = outer, current_row_sink = outer_rows; }  // also when the backward throws
  } scope;
  offered_sums = &sums;
  current_row_sink = rows;
  const OpSpan span(node.name(), true);
  node.backward(g, grads);
}

// Nodes reachable from `root`, each after every node that consumes its output.
std::vector<Node*> topological_order(Node* root) {
  std::vector<Node*> order;
  std::unordered_set<Node*> seen{root};
  std::vector<std::pair<Node*, size_t>> stack{{root, 0}};
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->inputs().size()) {
      const Variable& in = node->inputs()[next++];
      Node* child = in.defined() ? in.grad_fn().get() : nullptr;
      if (child && seen.insert(child).second) stack.push_back({child, 0});
    } else {
      order.push_back(node);
      stack.pop_back();
    }
  }
  return {order.rbegin(), order.rend()};  // root first
}

}  // namespace

void Variable::backward() const {
  ARTEL_CHECK(numel() == 1, "backward() without a gradient needs a scalar, got shape ", shape_str(shape()));
  backward(Tensor::full(shape(), 1.0f));
}

void Variable::backward(const Tensor& grad_output) const {
  ARTEL_CHECK(requires_grad(), "backward() on a variable that does not require grad");
  ARTEL_CHECK(grad_output.numel() == numel(), "backward: gradient of shape ", shape_str(grad_output.shape()),
              " for an output of shape ", shape_str(shape()));
  if (is_leaf()) {
    accumulate(impl_->grad, impl_->grad_owned, grad_output);
    for (auto& [_, hook] : impl_->hooks) hook(const_cast<Variable&>(*this));
    return;
  }
  std::vector<Node*> order = topological_order(grad_fn().get());

  // How many edges lead into each leaf: its gradient is final when all arrived.
  // Note [Row gradients]: a lookup's edge into a table with a row sink is
  // counted apart; where the table has dense edges too, its rows go to the
  // sink and it is final when the dense edges are in. A sparse table's
  // (rows_only) go to the sink too, and it is final when they all went.
  std::unordered_map<VariableImpl*, int> pending, lookups;
  for (Node* n : order)
    for (size_t i = 0; i < n->inputs().size(); ++i) {
      const Variable& in = n->inputs()[i];
      if (!needs_grad(in) || !in.is_leaf()) continue;
      const bool lookup = n->row_gradient_input() == static_cast<int>(i) && in.impl()->row_sink;
      ++(lookup ? lookups : pending)[in.impl()];
    }
  std::unordered_set<VariableImpl*> rows_apart, rows_final;  // rows_final: final once its rows went
  for (auto [leaf, edges] : lookups) {
    if (pending.count(leaf)) {
      rows_apart.insert(leaf);
      continue;
    }
    pending[leaf] = edges;  // an untied table: its rows are its gradient, or (sparse) all it hands over
    if (leaf->rows_only) rows_apart.insert(leaf), rows_final.insert(leaf);
  }

  std::unordered_map<Node*, Slot> slots;
  slots[order.front()] = {grad_output, false};
  std::vector<Tensor> grads;
  std::vector<const void*> sums;
  for (Node* node : order) {
    auto it = slots.find(node);
    Tensor g = std::move(it->second.grad);
    slots.erase(it);
    grads.assign(node->inputs().size(), Tensor());
    sums.clear();
    const int table = node->row_gradient_input();
    const int apart = table >= 0 && rows_apart.count(node->inputs()[static_cast<size_t>(table)].impl()) ? table : -1;
    if (g.defined()) {
      offer_slots(*node, apart, grads, sums);
      run_backward(*node, g, grads, sums, apart >= 0 ? &node->inputs()[static_cast<size_t>(apart)].impl()->row_sink : nullptr);
    }
    for (size_t i = 0; i < grads.size(); ++i) {
      const Variable& in = node->inputs()[i];
      if (!needs_grad(in)) continue;
      if (static_cast<int>(i) == apart) {
        ARTEL_CHECK(!grads[i].defined(), "backward: ", node->name(), " gave its table a dense gradient as well as its rows");
        if (rows_final.count(in.impl()) && --pending[in.impl()] == 0)
          for (auto& [_, hook] : in.impl()->hooks) hook(const_cast<Variable&>(in));
        continue;
      }
      if (!in.is_leaf()) {
        if (grads[i].defined()) {
          Slot& s = slots[in.grad_fn().get()];
          accumulate(s.grad, s.owned, grads[i]);
        } else {
          slots.try_emplace(in.grad_fn().get());
        }
        continue;
      }
      VariableImpl* leaf = in.impl();
      if (grads[i].defined() && !leaf->grad.defined() && leaf->grad_destination.defined() &&
          grads[i].raw() == leaf->grad_destination.raw()) {
        leaf->grad = leaf->grad_destination;  // written in place: ours to add into
        leaf->grad_owned = true;
      } else if (grads[i].defined() && leaf->grad.defined() && grads[i].raw() == leaf->grad.raw()) {
        leaf->grad_owned = true;  // added onto in place (offer_slots)
      } else if (grads[i].defined()) {
        accumulate(leaf->grad, leaf->grad_owned, grads[i]);
      }
      if (--pending[leaf] == 0)
        for (auto& [_, hook] : leaf->hooks) hook(const_cast<Variable&>(in));
    }
  }
}

const RowGradientSink* row_gradient_sink() { return current_row_sink; }

Tensor& grad_output_buffer(std::vector<Tensor>& grad_inputs, size_t i, const Shape& shape) {
  Tensor& t = grad_inputs[i];
  if (!t.defined() || t.shape() != shape || offered_as_sum(t)) t = Tensor::empty(shape);
  return t;
}

Tensor& grad_sum_buffer(std::vector<Tensor>& grad_inputs, size_t i, const Shape& shape, float& beta) {
  Tensor& t = grad_inputs[i];
  const bool sum = t.defined() && t.shape() == shape && offered_as_sum(t);
  beta = sum ? 1.0f : 0.0f;
  return sum ? t : grad_output_buffer(grad_inputs, i, shape);
}

}  // namespace artel::autograd
