#include "artel/core/rng.h"

#include <cmath>

namespace artel {

std::array<uint32_t, 4> Rng::philox(uint64_t key, uint64_t hi, uint64_t lo) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c[4] = {static_cast<uint32_t>(lo), static_cast<uint32_t>(lo >> 32), static_cast<uint32_t>(hi),
                   static_cast<uint32_t>(hi >> 32)};
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kM0) * c[0];
    uint64_t p1 = static_cast<uint64_t>(kM1) * c[2];
    uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k0;
    uint32_t n1 = static_cast<uint32_t>(p1);
    uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k1;
    uint32_t n3 = static_cast<uint32_t>(p0);
    c[0] = n0, c[1] = n1, c[2] = n2, c[3] = n3;
    k0 += kW0, k1 += kW1;
  }
  return {c[0], c[1], c[2], c[3]};
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
  // 1 - u keeps the logarithm's argument in (0, 1].
  float u1 = 1.0f - uniform();
  float u2 = uniform();
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853071795864f * u2);
}

float Rng::uniform_at(uint64_t seed, uint64_t stream, uint64_t index) {
  return static_cast<float>(philox(seed, stream, index)[0] >> 8) * (1.0f / 16777216.0f);
}

float Rng::normal_at(uint64_t seed, uint64_t stream, uint64_t index) {
  std::array<uint32_t, 4> w = philox(seed, stream, index);
  float u1 = 1.0f - static_cast<float>(w[0] >> 8) * (1.0f / 16777216.0f);
  float u2 = static_cast<float>(w[1] >> 8) * (1.0f / 16777216.0f);
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853071795864f * u2);
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
