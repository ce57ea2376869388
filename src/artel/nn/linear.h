// Linear: y = x·Wᵀ + b with W stored [out_features, in_features] (PyTorch's
// layout, so weights load into torch unchanged). Starts as PyTorch's does
// (U(−1/√in, 1/√in) for weight and bias) unless the model says otherwise.
//
// The same layer runs split over a tensor-parallel group when a model's plan
// says so (nn/parallel_plan.h): parallel/ then gives it its shard of W and b
// and the functions of set_parallel, and forward runs the same ops plus
// those (Megatron's column- and row-parallel Linear).
//
//   Linear fc(784, 512);                               // declared; materialize() draws it
//   Variable y = fc.forward(x);                        // (B, 784) -> (B, 512)
//   Variable h = proj.forward_onto(residual, x);       // residual + x·Wᵀ + b, one op
//   Variable a = fc.forward_gelu(x);                   // gelu(x·Wᵀ + b), one op
#pragma once

#include <functional>

#include "artel/nn/init.h"
#include "artel/nn/layer.h"

namespace artel::nn {

// What a tensor-parallel plan adds to a Linear (set by parallel/, which owns
// the collectives; empty functions are identities).
struct LinearParallel {
  enum class Kind { none, column, row };
  Kind kind = Kind::none;
  // column: on the input, which is replicated (Megatron's f: identity
  // forward, gradient summed over the group backward).
  std::function<Variable(const Variable&)> enter;
  // row: sums the ranks' partial outputs (Megatron's g).
  std::function<Variable(const Variable&)> reduce;
  // row: a replicated addend (bias, residual) that must enter the sum once:
  // itself on one rank, zeros on the others, the gradient passed through.
  std::function<Variable(const Variable&)> once;
  // Sequence parallelism (parallel/sequence_parallel.h): the layer sees only
  // this rank's tokens, so each replicated parameter (a whole layer's weight
  // and bias, a row-parallel layer's bias) passes through `shared`: identity
  // forward, its gradient summed over the group. A row-parallel layer's
  // `reduce` then scatters by tokens, and its bias and residual are added to
  // this rank's tokens after it instead of once into the sum.
  std::function<Variable(const Variable&)> shared;
};

class Linear : public Layer {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Linear(int64_t in_features, int64_t out_features, bool bias, Init weight_init, Init bias_init);
  Variable forward(const Variable& x) override;
  // residual + forward(x), the residual laid into the GEMM's output (autograd::linear_add).
  Variable forward_onto(const Variable& residual, const Variable& x);
  // GELU (the tanh approximation with tanh_approximation) of forward(x) as
  // one op, autograd::linear_gelu. A row-parallel layer's output is a partial
  // sum, which GELU must follow: it runs the two.
  Variable forward_gelu(const Variable& x, bool tanh_approximation = false);

  const Variable& weight() const { return weight_; }
  const Variable& bias() const { return bias_; }  // undefined without bias
  int64_t in_features() const { return in_; }    // of the whole layer
  int64_t out_features() const { return out_; }  // of the whole layer
  void set_parallel(LinearParallel p) { parallel_ = std::move(p); }
  const LinearParallel& parallel() const { return parallel_; }

 private:
  Variable input_of(const Variable& x) const;
  // A replicated parameter as this rank's ops use it (through `shared` under sequence parallelism).
  Variable replicated(const Variable& p) const;

  int64_t in_, out_;
  Variable weight_, bias_;
  LinearParallel parallel_;
};

}  // namespace artel::nn
