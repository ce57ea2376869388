// Finite-difference check of an op's backward (ggml test-backend-ops MODE_GRAD).
//
// The output is reduced to a scalar with fixed random weights, L = Σ wᵢ·yᵢ, so
// every output element's gradient path is exercised; the analytic dL/dx from
// backward() is compared with central differences on every input element.
// Tolerances are tight enough to catch a wrong sign or a missing term.
//
//   gradcheck([](auto& in) { return gelu(in[0]); }, {random_tensor({3, 4}, 1)});
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "artel/autograd/variable.h"
#include "artel/core/rng.h"

namespace artel::autograd::testing {

inline Tensor random_tensor(const Shape& shape, uint64_t seed, float scale = 1.0f) {
  Tensor t = Tensor::empty(shape);
  Rng rng(seed, 99);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = scale * rng.normal();
  return t;
}

using OpFn = std::function<Variable(std::vector<Variable>&)>;

// Double-precision sum of w·y for the op on `values` (no graph).
inline double weighted_output(const OpFn& op, const std::vector<Tensor>& values, const Tensor& weights) {
  NoGradGuard no_grad;
  std::vector<Variable> vars;
  for (const auto& v : values) vars.emplace_back(v, false);
  Tensor y = op(vars).value();
  const float* py = y.data<float>();
  const float* pw = weights.data<float>();
  double s = 0;
  for (int64_t i = 0; i < y.numel(); ++i) s += static_cast<double>(pw[i]) * py[i];
  return s;
}

// `differentiable[i]` false: input i is held constant (e.g. an index tensor stored as f32 is not allowed; use capture).
inline void gradcheck(const OpFn& op, std::vector<Tensor> inputs, float eps = 1e-2f, float rtol = 2e-2f,
                      float atol = 2e-3f, std::vector<bool> differentiable = {}) {
  if (differentiable.empty()) differentiable.assign(inputs.size(), true);
  std::vector<Variable> vars;
  for (size_t i = 0; i < inputs.size(); ++i) vars.emplace_back(inputs[i].clone(), static_cast<bool>(differentiable[i]));
  Variable y = op(vars);
  Tensor w = random_tensor(y.shape(), 4242);
  y.backward(w);

  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!differentiable[i]) continue;
    ASSERT_TRUE(vars[i].grad().defined()) << "input " << i << " received no gradient";
    const float* analytic = vars[i].grad().data<float>();
    std::vector<Tensor> probe;
    for (auto& t : inputs) probe.push_back(t.clone());
    float* p = probe[i].data<float>();
    for (int64_t j = 0; j < probe[i].numel(); ++j) {
      float orig = p[j];
      p[j] = orig + eps;
      double up = weighted_output(op, probe, w);
      p[j] = orig - eps;
      double down = weighted_output(op, probe, w);
      p[j] = orig;
      double numeric = (up - down) / (2.0 * eps);
      double diff = std::abs(numeric - analytic[j]);
      ASSERT_LE(diff, atol + rtol * std::abs(numeric))
          << "input " << i << " element " << j << ": analytic " << analytic[j] << " vs numeric " << numeric;
    }
  }
}

}  // namespace artel::autograd::testing
