#include "artel/nn/init.h"

#include <cmath>

#include "artel/core/threads.h"

namespace artel::nn {

Init Init::normal(float mean, float std) {
  ARTEL_CHECK(std >= 0, "Init::normal: negative std ", std);
  return {Kind::normal, mean, std};
}

Init Init::uniform(float low, float high) {
  ARTEL_CHECK(low <= high, "Init::uniform: low ", low, " above high ", high);
  return {Kind::uniform, low, high};
}

Init Init::default_uniform(int64_t fan_in) {
  ARTEL_CHECK(fan_in > 0, "Init::default_uniform: fan_in must be positive, got ", fan_in);
  const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
  return uniform(-bound, bound);
}

uint64_t stream_of(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

namespace {

float draw(const Init& init, uint64_t seed, uint64_t stream, uint64_t e) {
  switch (init.kind) {
    case Init::Kind::zeros: return 0.0f;
    case Init::Kind::ones: return 1.0f;
    case Init::Kind::normal: return init.a + init.b * Rng::normal_at(seed, stream, e);
    case Init::Kind::uniform: return init.a + (init.b - init.a) * Rng::uniform_at(seed, stream, e);
  }
  return 0.0f;
}

}  // namespace

void fill(Tensor& out, const Init& init, uint64_t seed, uint64_t stream, const Shape& whole, const Split& split,
          int part, int parts) {
  const PartGeometry g = part_geometry(whole, split, part, parts);
  ARTEL_CHECK(out.dtype() == DType::f32 && out.shape() == g.shape, "init: filling ", dtype_name(out.dtype()), " ",
              shape_str(out.shape()), " as part ", part, " of ", parts, " (", shape_str(g.shape), ") of ",
              shape_str(whole));
  float* d = out.data<float>();
  const int64_t valid = g.valid();
  // One row of the part: (outer o, local mid m) -> inner elements.
  parallel_for(g.outer * g.count, std::max<int64_t>(1, 4096 / g.inner), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t o = r / g.count, m = r % g.count;
      float* row = d + r * g.inner;
      if (m >= valid) {
        for (int64_t i = 0; i < g.inner; ++i) row[i] = 0.0f;
        continue;
      }
      const auto first = static_cast<uint64_t>((o * g.mid + g.begin + m) * g.inner);
      for (int64_t i = 0; i < g.inner; ++i) row[i] = draw(init, seed, stream, first + static_cast<uint64_t>(i));
    }
  });
}

namespace init {

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

}  // namespace init
}  // namespace artel::nn
