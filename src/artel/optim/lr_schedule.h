// Learning-rate schedules as pure functions of the step, so every rank and a
// resumed run agree without state. `cosine` is nanoGPT's get_lr: linear warmup
// to lr over warmup_steps, cosine decay to min_lr at decay_steps, min_lr after.
// `constant` also honours the warmup (warmup_steps 0 = plain constant).
//
//   LrSchedule s{.kind = LrSchedule::Kind::cosine, .lr = 1e-3f, .warmup_steps = 100, .decay_steps = 2000};
//   opt.set_lr(s.at(step));   // step = updates already done: 0 for the first
#pragma once

#include <cstdint>
#include <string>

namespace artel::optim {

struct LrSchedule {
  enum class Kind { constant, cosine };
  Kind kind = Kind::constant;
  float lr = 1e-3f;           // peak learning rate, > 0
  int64_t warmup_steps = 0;   // >= 0
  int64_t decay_steps = 0;    // cosine: the step where min_lr is reached (nanoGPT lr_decay_iters), > warmup_steps
  float min_lr = -1.0f;       // cosine floor; negative = lr / 10 (nanoGPT's convention)

  void validate() const;      // throws artel::Error naming the bad field
  float at(int64_t step) const;
  float floor() const { return min_lr < 0 ? lr / 10.0f : min_lr; }
};

// "constant" | "cosine" -> Kind; anything else is an Error listing the choices.
LrSchedule::Kind parse_lr_schedule_kind(const std::string& name);

}  // namespace artel::optim
