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

}  // namespace artel::optim
