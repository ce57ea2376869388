// Parameter initialisation. A layer declares how each of its parameters
// starts (an Init); the values are drawn when the model is materialised
// (nn/module.h, Note [Declared parameters]), each parameter from its own
// counter-based stream and each element from its own counter, so a worker
// that holds only a shard draws exactly the values the whole model would
// hold there. The defaults of PyTorch's Linear and Conv2d
// (kaiming_uniform_(a=√5) on the weight, U(±1/√fan_in) on the bias) both
// come down to U(−1/√fan_in, 1/√fan_in): Init::default_uniform.
//
//   Init w = Init::normal(0.0f, 0.02f);
//   fill(t, w, seed, stream_of("fc.weight"), t.shape());        // the whole tensor
//   fill(mine, w, seed, stream_of("fc.weight"), {8, 4}, {.dim = 0}, 1, 2);   // rows 4..7 only
//   nn::init::normal(t, 0.0f, 1.0f, rng);                       // from a sequential Rng (tests, data)
#pragma once

#include <cstdint>
#include <string>

#include "artel/core/rng.h"
#include "artel/core/tensor.h"
#include "artel/nn/split.h"

namespace artel::nn {

struct Init {
  enum class Kind { zeros, ones, normal, uniform };
  Kind kind = Kind::zeros;
  float a = 0, b = 0;  // normal: mean, std; uniform: low, high

  static Init zeros() { return {Kind::zeros}; }
  static Init ones() { return {Kind::ones}; }
  static Init normal(float mean, float std);
  static Init uniform(float low, float high);
  // U(−1/√fan_in, 1/√fan_in): PyTorch's default for Linear / Conv weights and biases.
  static Init default_uniform(int64_t fan_in);
};

// The stream of a parameter: a hash (FNV-1a) of its whole-model name, so the
// same name draws the same values in every layout.
uint64_t stream_of(const std::string& name);

// Fills `out`, part `part` of `parts` (split as `split`) of a parameter of
// shape `whole`: whole element e is init's draw number e of (seed, stream);
// padding is zero. f32 only.
void fill(Tensor& out, const Init& init, uint64_t seed, uint64_t stream, const Shape& whole, const Split& split = {},
          int part = 0, int parts = 1);

namespace init {

// From a sequential generator (not addressed by element): tests and data.
void normal(Tensor& t, float mean, float std, Rng& rng);
void uniform(Tensor& t, float low, float high, Rng& rng);
void zeros(Tensor& t);
void ones(Tensor& t);

}  // namespace init
}  // namespace artel::nn
