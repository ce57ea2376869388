// AdamW, exactly torch.optim.AdamW (amsgrad off):
//   p *= 1 − lr·wd                                  (decoupled decay)
//   m = β1·m + (1 − β1)·g,   v = β2·v + (1 − β2)·g²
//   p -= lr/(1 − β1^t) · m / (√v / √(1 − β2^t) + eps)
// One fused pass over p, g, m, v per parameter, split over threads for large
// tensors. Use decay_groups() to decay only parameters with >= 2 dimensions.
//
//   AdamW opt(decay_groups(model.named_parameters(), 1e-3f, 0.1f), {.beta2 = 0.99f});
#pragma once

#include "artel/optim/optimizer.h"

namespace artel::optim {

struct AdamWOptions {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
};

// The update on raw spans for step number `step` (1 on the first update),
// reading each gradient times `grad_scale` (Optimizer::step).
void adamw_update(float* p, const float* grad, float* m, float* v, int64_t n, float lr, float weight_decay,
                  const AdamWOptions& opt, int64_t step, float grad_scale = 1.0f);

class AdamW : public Optimizer {
 public:
  AdamW(std::vector<ParamGroup> groups, AdamWOptions options = {});
  const AdamWOptions& options() const { return options_; }

 protected:
  void update(Slot& slot, const ParamGroup& group, float* value, const float* grad, float grad_scale,
              bool first) override;

 private:
  AdamWOptions options_;
};

}  // namespace artel::optim
