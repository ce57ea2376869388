#include "artel/optim/lr_schedule.h"

#include <cmath>
#include <numbers>

#include "artel/core/error.h"

namespace artel::optim {

void LrSchedule::validate() const {
  ARTEL_CHECK(lr > 0 && std::isfinite(lr), "learning rate must be positive, got ", lr);
  ARTEL_CHECK(warmup_steps >= 0, "warmup steps must be >= 0, got ", warmup_steps);
  if (kind == Kind::cosine) {
    ARTEL_CHECK(decay_steps > warmup_steps, "cosine schedule: decay steps (", decay_steps,
                ") must exceed warmup steps (", warmup_steps, ") (hint: lower --warmup-steps or raise --steps)");
    ARTEL_CHECK(floor() <= lr, "cosine schedule: min_lr ", floor(), " above lr ", lr);
  }
}

float LrSchedule::at(int64_t step) const {
  ARTEL_CHECK(step >= 0, "learning-rate schedule: negative step ", step);
  if (step < warmup_steps)
    return static_cast<float>(static_cast<double>(lr) * static_cast<double>(step + 1) / (warmup_steps + 1));
  if (kind == Kind::constant) return lr;
  if (step > decay_steps) return floor();
  double ratio = static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps - warmup_steps);
  double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * ratio));
  return static_cast<float>(floor() + coeff * (static_cast<double>(lr) - floor()));
}

LrSchedule::Kind parse_lr_schedule_kind(const std::string& name) {
  if (name == "constant") return LrSchedule::Kind::constant;
  if (name == "cosine") return LrSchedule::Kind::cosine;
  throw Error("unknown learning-rate schedule '" + name + "'", "choose constant or cosine");
}

}  // namespace artel::optim
