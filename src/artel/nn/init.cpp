#include "artel/nn/init.h"

#include <cmath>

namespace artel::nn::init {

void normal(Tensor& t, float mean, float std, Rng& rng) {
  ARTEL_CHECK(std >= 0, "init::normal: negative std ", std);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = mean + std * rng.normal();
}

void uniform(Tensor& t, float low, float high, Rng& rng) {
  ARTEL_CHECK(low <= high, "init::uniform: low ", low, " above high ", high);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = low + (high - low) * rng.uniform();
}

void zeros(Tensor& t) { t.zero(); }
void ones(Tensor& t) { t.fill(1.0f); }

void default_uniform(Tensor& t, int64_t fan_in, Rng& rng) {
  ARTEL_CHECK(fan_in > 0, "init::default_uniform: fan_in must be positive, got ", fan_in);
  float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
  uniform(t, -bound, bound, rng);
}

}  // namespace artel::nn::init
