// Global-norm gradient clipping, as torch.nn.utils.clip_grad_norm_: the L2
// norm over all gradients together; when it exceeds max_norm every gradient is
// scaled by max_norm / (norm + 1e-6). Parameters without a gradient are
// skipped. Returns the norm before clipping (max_norm <= 0: only measures).
//
//   float norm = clip_grad_norm(model.parameters(), 1.0f);
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "artel/autograd/variable.h"

namespace artel::optim {

float clip_grad_norm(const std::vector<autograd::Variable>& params, float max_norm);
float grad_norm(const std::vector<autograd::Variable>& params);

// A run of one parameter's gradient elements.
struct GradSpan {
  std::string name;   // the parameter's
  float* data = nullptr;
  int64_t size = 0;
};

// The one global-norm clipping, for every layout: `counted` are the spans
// this rank adds to the norm (over all ranks, each element of the model once),
// `sum_over_ranks` turns this rank's sum of squares into the global one (empty:
// alone), and every span of `scaled` is multiplied by the coefficient.
// Returns the global norm before clipping.
float clip_grad_norm(const std::vector<GradSpan>& counted, const std::vector<GradSpan>& scaled, float max_norm,
                     const std::function<double(double)>& sum_over_ranks);
// Its measuring half alone, for layouts that hand clip_coefficient(norm) to
// the optimizer (Optimizer::step's grad_scale) instead of scaling: one pass
// over the gradients fewer.
float global_grad_norm(const std::vector<GradSpan>& counted, const std::function<double(double)>& sum_over_ranks);
// Every parameter's whole gradient (those that have one), as spans. Writable
// spans give a gradient the graph shares with another leaf a private copy
// first (Note [Gradient ownership]); read-only ones (writable false) never copy.
std::vector<GradSpan> gradient_spans(const std::vector<std::pair<std::string, autograd::Variable>>& params,
                                     bool writable = true);

// The pieces, for gradients that live elsewhere (a sharded data-parallel step):
// sum of d[i]² in the order grad_norm uses, and the factor gradients of total
// norm `norm` are scaled by (1 when no clipping is due).
double sum_of_squares(const float* d, int64_t n);
float clip_coefficient(float norm, float max_norm);

}  // namespace artel::optim
