#include "artel/core/rng.h"

#include <cmath>
#include <cstring>

// The lane vectors never cross a library interface (they live in this
// file), so GCC's note that passing them changes the ABI does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace artel {
namespace {

// Note [Machine-independent normals]
// A model's initial weights must be the same bits wherever they are drawn:
// a worker that holds a shard draws its elements itself (Note [Declared
// parameters] in nn/module.h), and ranks on different hosts may run builds
// for different CPUs. glibc's logf and cosf promise neither (their variants
// are picked per CPU) nor a vector form, and at ~40 ns a draw they made
// drawing GPT-2's 124 M initial weights take 5 s a worker. So Box-Muller is
// computed here, in double, by series whose error is far below a float's
// rounding, with each operation exact per lane under IEEE rules (this file
// is compiled with -ffp-contract=off: no fused multiply-adds, whose use
// would differ between builds), and written once for L lanes: a single draw
// is the one-lane case of a run.
template <int L>
struct Lanes {
  typedef uint64_t U __attribute__((vector_size(8 * L)));
  typedef int64_t I __attribute__((vector_size(8 * L)));
  typedef double D __attribute__((vector_size(8 * L)));
};

constexpr uint64_t kLow32 = 0xffffffffu;

// Philox4x32-10's four words at counters `index` of (key, stream), each
// 32-bit word in a 64-bit lane (U: lanes, or one uint64_t for Rng::philox).
template <class U>
std::array<U, 4> philox_words(uint64_t key, uint64_t stream, U index) {
  constexpr uint64_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  U c0 = index & kLow32, c1 = index >> 32, c2 = U{} + (stream & kLow32), c3 = U{} + (stream >> 32);
  uint64_t k0 = key & kLow32, k1 = key >> 32;
  for (int round = 0; round < 10; ++round) {
    const U p0 = c0 * kM0, p1 = c2 * kM1;
    c0 = (p1 >> 32) ^ c1 ^ k0;
    c1 = p1 & kLow32;
    c2 = (p0 >> 32) ^ c3 ^ k1;
    c3 = p0 & kLow32;
    k0 = (k0 + kW0) & kLow32, k1 = (k1 + kW1) & kLow32;
  }
  return {c0, c1, c2, c3};
}

// Σ_{k≤10} x^k / (2k+1) and Σ_{k≤12} (−x)^k / (2k)!, evaluated by Horner.
template <class D>
D odd_reciprocals(D x) {
  D p = D{} + 1.0 / 21;
  for (int k = 9; k >= 0; --k) p = p * x + 1.0 / (2 * k + 1);
  return p;
}
template <class D>
D cosine_series(D x) {
  constexpr int kTerms = 13;  // through x^24/24!: below 1e-13 at |x| = π
  double c[kTerms] = {1.0};
  for (int k = 1; k < kTerms; ++k) c[k] = -c[k - 1] / ((2.0 * k - 1) * (2.0 * k));
  D p = D{} + c[kTerms - 1];
  for (int k = kTerms - 2; k >= 0; --k) p = p * x + c[k];
  return p;
}

// Box-Muller on the 24-bit uniforms a = w0 >> 8 and b = w1 >> 8 (as
// uniform_at draws them): √(−2 ln u1) · cos(2π u2), u1 = 1 − a/2²⁴ in
// (0, 1], u2 = b/2²⁴ in [0, 1).
template <int L>
typename Lanes<L>::D box_muller(typename Lanes<L>::U w0, typename Lanes<L>::U w1) {
  using U = typename Lanes<L>::U;
  using I = typename Lanes<L>::I;
  using D = typename Lanes<L>::D;
  // ln u1 = ln j − 24 ln 2, j = 2²⁴ − a = m·2^e with m in [1, 2); ln m =
  // 2 artanh s = 2 Σ s^(2k+1)/(2k+1), s = (m−1)/(m+1) in [0, 1/3).
  const D j = __builtin_convertvector((U{} + (1ull << 24)) - (w0 >> 8), D);
  U bits;
  std::memcpy(&bits, &j, sizeof bits);
  const D e = __builtin_convertvector((bits >> 52) - 1023, D);
  bits = (bits & ((1ull << 52) - 1)) | (1023ull << 52);
  D m;
  std::memcpy(&m, &bits, sizeof m);
  const D s = (m - 1.0) / (m + 1.0);
  const D ln_u1 = (e - 24.0) * 0.69314718055994530942 + 2.0 * s * odd_reciprocals(s * s);
  D radius = -2.0 * ln_u1;
  for (int l = 0; l < L; ++l) radius[l] = std::sqrt(radius[l]);
  // cos(2π u2) = −cos x, x = π (b − 2²³)/2²³ in [−π, π).
  const D x = __builtin_convertvector(__builtin_convertvector(w1 >> 8, I) - (1ll << 23), D) *
              (3.14159265358979323846 / (1 << 23));
  return radius * -cosine_series(x * x);
}

}  // namespace

std::array<uint32_t, 4> Rng::philox(uint64_t key, uint64_t hi, uint64_t lo) {
  const std::array<uint64_t, 4> w = philox_words(key, hi, lo);  // in general-purpose registers, not a vector's
  return {static_cast<uint32_t>(w[0]), static_cast<uint32_t>(w[1]), static_cast<uint32_t>(w[2]),
          static_cast<uint32_t>(w[3])};
}

uint32_t Rng::next_u32() {
  if (state_.used >= 4) {
    block_ = philox(state_.seed, state_.stream, state_.counter++);
    state_.used = 0;
  }
  return block_[state_.used++];
}

void Rng::set_state(const RngState& s) {
  state_ = s;
  // Restored mid-block (e.g. from a checkpoint): regenerate the current block.
  if (state_.used < 4 && state_.counter > 0) block_ = philox(state_.seed, state_.stream, state_.counter - 1);
}

float Rng::uniform() { return static_cast<float>(next_u32() >> 8) * (1.0f / 16777216.0f); }

float Rng::normal() {
  const uint32_t a = next_u32();
  return static_cast<float>(box_muller<1>(Lanes<1>::U{a}, Lanes<1>::U{next_u32()})[0]);
}

float Rng::uniform_at(uint64_t seed, uint64_t stream, uint64_t index) {
  float u;
  uniform_run(seed, stream, index, 1, &u);
  return u;
}

float Rng::normal_at(uint64_t seed, uint64_t stream, uint64_t index) {
  float z;
  normal_run(seed, stream, index, 1, &z);
  return z;
}

namespace {

// Draws first .. first + n − 1 of (seed, stream) through draw(w0, w1), kLanes
// at a time, the rest one at a time: the same bits either way.
template <class Draw>
void run(uint64_t seed, uint64_t stream, uint64_t first, int64_t n, float* out, Draw draw) {
  constexpr int kLanes = 8;
  using U = Lanes<kLanes>::U;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    U index;
    for (int l = 0; l < kLanes; ++l) index[l] = first + static_cast<uint64_t>(i + l);
    const std::array<U, 4> w = philox_words(seed, stream, index);
    const auto drawn = draw(w[0], w[1]);
    for (int l = 0; l < kLanes; ++l) out[i + l] = static_cast<float>(drawn[l]);
  }
  for (; i < n; ++i) {
    const std::array<Lanes<1>::U, 4> w = philox_words(seed, stream, Lanes<1>::U{first + static_cast<uint64_t>(i)});
    out[i] = static_cast<float>(draw(w[0], w[1])[0]);
  }
}

}  // namespace

void Rng::uniform_run(uint64_t seed, uint64_t stream, uint64_t first, int64_t n, float* out) {
  run(seed, stream, first, n, out, [](auto w0, auto) {
    using D = typename Lanes<sizeof(w0) / sizeof(uint64_t)>::D;
    return __builtin_convertvector(w0 >> 8, D) * (1.0 / 16777216.0);  // exact: 24 bits
  });
}

void Rng::normal_run(uint64_t seed, uint64_t stream, uint64_t first, int64_t n, float* out) {
  run(seed, stream, first, n, out, [](auto w0, auto w1) {
    return box_muller<sizeof(w0) / sizeof(uint64_t)>(w0, w1);
  });
}

uint64_t Rng::below(uint64_t n) {
  if (n <= 1) return 0;
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do x = next_u64();
  while (x >= limit);
  return x % n;
}

}  // namespace artel
