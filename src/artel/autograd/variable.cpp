#include "artel/autograd/variable.h"

#include <atomic>

namespace artel::autograd {

namespace {
thread_local bool t_grad_enabled = true;
}

bool grad_enabled() { return t_grad_enabled; }

NoGradGuard::NoGradGuard() : previous_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = previous_; }

Variable::Variable(Tensor value, bool requires_grad) : impl_(std::make_shared<VariableImpl>()) {
  impl_->value = std::move(value);
  set_requires_grad(requires_grad);
}

void Variable::set_requires_grad(bool r) {
  ARTEL_CHECK(!r || impl_->value.dtype() == DType::f32, "only float32 tensors can require gradients");
  ARTEL_CHECK(is_leaf() || r, "cannot stop a non-leaf variable from requiring grad; use detach()");
  impl_->requires_grad = r;
}

void Variable::set_grad(Tensor g) {
  ARTEL_CHECK(!g.defined() || g.numel() == numel(), "set_grad: gradient of shape ", shape_str(g.shape()),
              " for a variable of shape ", shape_str(shape()));
  impl_->grad = std::move(g);
  impl_->grad_owned = false;
}

void Variable::zero_grad() {
  impl_->grad = Tensor();
  impl_->grad_owned = false;
}

void Variable::set_rounded(Tensor bits) {
  ARTEL_CHECK(!bits.defined() || (bits.dtype() == DType::bf16 && bits.numel() == numel()), "set_rounded: ",
              shape_str(bits.shape()), " is not a bf16 copy of a value of shape ", shape_str(shape()));
  impl_->rounded = std::move(bits);
}

void Variable::set_grad_destination(Tensor destination) {
  ARTEL_CHECK(!destination.defined() || (is_leaf() && destination.shape() == shape() &&
                                         destination.dtype() == DType::f32),
              "set_grad_destination: needs a leaf and a float32 tensor of its shape ", shape_str(shape()));
  impl_->grad_destination = std::move(destination);
}

void Variable::set_row_gradient_sink(RowGradientSink sink, bool rows_only) {
  ARTEL_CHECK(!sink || (is_leaf() && requires_grad()), "set_row_gradient_sink: needs a leaf that requires grad");
  impl_->rows_only = sink && rows_only;
  impl_->row_sink = std::move(sink);
}

Tensor reusable_grad(const Tensor& grad_output) {
  if (grad_output.storage().use_count() == 1) return grad_output;
  return Tensor::empty(grad_output.shape());
}

uint64_t Variable::add_grad_ready_hook(GradReadyHook hook) {
  ARTEL_CHECK(is_leaf() && requires_grad(), "grad-ready hooks are for leaves that require grad");
  static std::atomic<uint64_t> next{1};
  const uint64_t handle = next.fetch_add(1, std::memory_order_relaxed);
  impl_->hooks.emplace_back(handle, std::move(hook));
  return handle;
}

void Variable::remove_grad_ready_hook(uint64_t handle) {
  std::erase_if(impl_->hooks, [handle](const auto& h) { return h.first == handle; });
}

// Note [Edges without values]: a node's backward keeps what it reads in its
// closure; its inputs are only the graph's edges. So a node holds a leaf that
// needs a gradient (its gradient gathers there), an edge to the node of a
// non-leaf input (a Variable of that node alone, without the value), and
// nothing for an input that needs no gradient. An input whose value the
// backward does not read is then freed when its last user lets go of it, not
// at backward: a sum's terms (a dropout's output added to the residual), or a
// row-parallel layer's partial sum, reduced across ranks. PyTorch's edges
// point at grad_fn nodes the same way.
Variable make_result(Tensor value, std::vector<Variable> inputs, const char* name, Node::BackwardFn backward) {
  Variable out(std::move(value), false);
  if (!grad_enabled()) return out;
  bool any = false;
  for (const auto& v : inputs) any = any || needs_grad(v);
  if (!any) return out;
  for (Variable& v : inputs) {
    if (!needs_grad(v)) {
      v = Variable();
    } else if (!v.is_leaf()) {
      Variable edge;
      edge.impl_ = std::make_shared<VariableImpl>();
      edge.impl_->requires_grad = true;
      edge.impl_->grad_fn = v.impl_->grad_fn;
      v = std::move(edge);
    }
  }
  out.impl_->requires_grad = true;
  out.impl_->grad_fn = std::make_shared<Node>(name, std::move(inputs), std::move(backward));
  return out;
}

}  // namespace artel::autograd
