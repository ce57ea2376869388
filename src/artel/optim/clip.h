// Global-norm gradient clipping, as torch.nn.utils.clip_grad_norm_: the L2
// norm over all gradients together; when it exceeds max_norm every gradient is
// scaled by max_norm / (norm + 1e-6). Parameters without a gradient are
// skipped. Returns the norm before clipping (max_norm <= 0: only measures).
//
//   float norm = clip_grad_norm(model.parameters(), 1.0f);
#pragma once

#include <vector>

#include "artel/autograd/variable.h"

namespace artel::optim {

float clip_grad_norm(const std::vector<autograd::Variable>& params, float max_norm);
float grad_norm(const std::vector<autograd::Variable>& params);

// The pieces, for gradients that live elsewhere (a sharded data-parallel step):
// sum of d[i]² in the order grad_norm uses, and the factor gradients of total
// norm `norm` are scaled by (1 when no clipping is due).
double sum_of_squares(const float* d, int64_t n);
float clip_coefficient(float norm, float max_norm);

}  // namespace artel::optim
