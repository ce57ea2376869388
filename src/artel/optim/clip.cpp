#include "artel/optim/clip.h"

#include <cmath>

namespace artel::optim {

double sum_of_squares(const float* d, int64_t n) {
  // 16 f32 lanes vectorise (a single running sum would not); lanes are then
  // summed in double.
  double sq = 0;
  float lanes[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) lanes[j] += d[i + j] * d[i + j];
  for (; i < n; ++i) sq += static_cast<double>(d[i]) * d[i];
  for (float l : lanes) sq += l;
  return sq;
}

float clip_coefficient(float norm, float max_norm) {
  if (max_norm <= 0) return 1.0f;
  float coef = max_norm / (norm + 1e-6f);
  return coef < 1.0f ? coef : 1.0f;
}

float grad_norm(const std::vector<autograd::Variable>& params) {
  double sq = 0;
  for (const auto& p : params)
    if (p.grad().defined()) sq += sum_of_squares(p.grad().data<float>(), p.grad().numel());
  return static_cast<float>(std::sqrt(sq));
}

float clip_grad_norm(const std::vector<autograd::Variable>& params, float max_norm) {
  float norm = grad_norm(params);
  float coef = clip_coefficient(norm, max_norm);
  if (coef == 1.0f) return norm;
  for (const auto& p : params) {
    autograd::VariableImpl* impl = p.impl();
    if (!impl->grad.defined()) continue;
    // A gradient borrowed from the graph may be shared with another leaf's
    // (Note [Gradient ownership]): scale a private copy, never the shared one.
    if (!impl->grad_owned) {
      impl->grad = impl->grad.clone();
      impl->grad_owned = true;
    }
    float* d = impl->grad.data<float>();
    for (int64_t i = 0; i < impl->grad.numel(); ++i) d[i] *= coef;
  }
  return norm;
}

}  // namespace artel::optim
