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

std::vector<GradSpan> gradient_spans(const std::vector<std::pair<std::string, autograd::Variable>>& params,
                                     bool writable) {
  std::vector<GradSpan> spans;
  for (const auto& [name, p] : params) {
    autograd::VariableImpl* impl = p.impl();
    if (!impl->grad.defined()) continue;
    // A gradient borrowed from the graph may be shared with another leaf's
    // (Note [Gradient ownership]): hand out a private copy, never the shared one.
    if (writable && !impl->grad_owned) {
      impl->grad = impl->grad.clone();
      impl->grad_owned = true;
    }
    spans.push_back({name, impl->grad.data<float>(), impl->grad.numel()});
  }
  return spans;
}

float global_grad_norm(const std::vector<GradSpan>& counted, const std::function<double(double)>& sum_over_ranks) {
  double sq = 0;
  for (const GradSpan& s : counted) sq += sum_of_squares(s.data, s.size);
  if (sum_over_ranks) sq = sum_over_ranks(sq);
  return static_cast<float>(std::sqrt(sq));
}

float clip_grad_norm(const std::vector<GradSpan>& counted, const std::vector<GradSpan>& scaled, float max_norm,
                     const std::function<double(double)>& sum_over_ranks) {
  const float norm = global_grad_norm(counted, sum_over_ranks);
  const float coef = clip_coefficient(norm, max_norm);
  if (coef == 1.0f) return norm;
  for (const GradSpan& s : scaled)
    for (int64_t i = 0; i < s.size; ++i) s.data[i] *= coef;
  return norm;
}

namespace {

std::vector<std::pair<std::string, autograd::Variable>> unnamed(const std::vector<autograd::Variable>& params) {
  std::vector<std::pair<std::string, autograd::Variable>> named;
  for (const auto& p : params) named.emplace_back("", p);
  return named;
}

}  // namespace

float grad_norm(const std::vector<autograd::Variable>& params) {
  return global_grad_norm(gradient_spans(unnamed(params), false), {});
}

float clip_grad_norm(const std::vector<autograd::Variable>& params, float max_norm) {
  const std::vector<GradSpan> spans = gradient_spans(unnamed(params));
  return clip_grad_norm(spans, spans, max_norm, {});
}

}  // namespace artel::optim
