#include "artel/nn/init.h"

#include <algorithm>
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

// Elements first .. first + n − 1 of the whole tensor, as `init` draws them.
void draw(const Init& init, uint64_t seed, uint64_t stream, uint64_t first, int64_t n, float* out) {
  switch (init.kind) {
    case Init::Kind::zeros: std::fill(out, out + n, 0.0f); return;
    case Init::Kind::ones: std::fill(out, out + n, 1.0f); return;
    case Init::Kind::normal:
      Rng::normal_run(seed, stream, first, n, out);
      for (int64_t i = 0; i < n; ++i) out[i] = init.a + init.b * out[i];
      return;
    case Init::Kind::uniform:
      Rng::uniform_run(seed, stream, first, n, out);
      for (int64_t i = 0; i < n; ++i) out[i] = init.a + (init.b - init.a) * out[i];
      return;
  }
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
  // Rows of the part: (outer o, local mid m) -> inner elements. The rows of
  // one o are contiguous in the part and in the whole tensor, so each such
  // span is one run of draws (a replicated tensor: one run per thread).
  parallel_for(g.outer * g.count, std::max<int64_t>(1, 4096 / g.inner), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1;) {
      const int64_t o = r / g.count, m = r % g.count;
      const int64_t rows = std::min(r1 - r, g.count - m);
      const int64_t drawn = std::clamp<int64_t>(valid - m, 0, rows);  // the rest is padding: zeros
      float* span = d + r * g.inner;
      draw(init, seed, stream, static_cast<uint64_t>((o * g.mid + g.begin + m) * g.inner), drawn * g.inner, span);
      std::fill(span + drawn * g.inner, span + rows * g.inner, 0.0f);
      r += rows;
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
