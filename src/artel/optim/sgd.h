// SGD with momentum, Nesterov and weight decay, exactly torch.optim.SGD:
//   g = grad + wd·p
//   buf = g on the first step, else momentum·buf + (1 − dampening)·g
//   g = nesterov ? g + momentum·buf : buf        (when momentum != 0)
//   p -= lr·g
// One fused pass over p, grad and buf per parameter, split over threads for
// large tensors (W1 steps 670k parameters every 5 ms).
//
//   Sgd opt(one_group(model.named_parameters(), 0.05f), {.momentum = 0.9f});
#pragma once

#include "artel/optim/optimizer.h"

namespace artel::optim {

struct SgdOptions {
  float momentum = 0.0f;   // 0 = plain SGD (no buffer)
  float dampening = 0.0f;
  bool nesterov = false;   // needs momentum > 0 and dampening 0, as PyTorch
};

// The update on raw spans (for sharded optimizers too). `buf` may be null when momentum is 0.
// Each gradient is read times `grad_scale` (Optimizer::step).
void sgd_update(float* p, const float* grad, float* buf, int64_t n, float lr, float weight_decay,
                const SgdOptions& opt, bool first_step, float grad_scale = 1.0f);

class Sgd : public Optimizer {
 public:
  Sgd(std::vector<ParamGroup> groups, SgdOptions options = {});
  const SgdOptions& options() const { return options_; }

 protected:
  void update(Slot& slot, const ParamGroup& group, float* value, const float* grad, float grad_scale,
              bool first) override;

 private:
  SgdOptions options_;
};

}  // namespace artel::optim
