// Parameter initialisation, drawing from artel::Rng so a seed fixes every
// weight on every rank. The defaults of PyTorch's Linear and Conv2d
// (kaiming_uniform_(a=√5) on the weight, U(±1/√fan_in) on the bias) both come
// down to U(−1/√fan_in, 1/√fan_in), which is what default_uniform draws.
//
//   Rng rng(seed);
//   nn::init::normal(w.value(), 0.0f, 0.02f, rng);
//   nn::init::zeros(b.value());
#pragma once

#include <cstdint>

#include "artel/core/rng.h"
#include "artel/core/tensor.h"

namespace artel::nn::init {

void normal(Tensor& t, float mean, float std, Rng& rng);
void uniform(Tensor& t, float low, float high, Rng& rng);
void zeros(Tensor& t);
void ones(Tensor& t);
// U(−1/√fan_in, 1/√fan_in): PyTorch's default for Linear / Conv weights and biases.
void default_uniform(Tensor& t, int64_t fan_in, Rng& rng);

}  // namespace artel::nn::init
