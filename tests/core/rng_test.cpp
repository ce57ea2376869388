#include "artel/core/rng.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

namespace artel {

TEST(Rng, PhiloxMatchesRandom123KnownAnswer) {
  // Random123 kat_vectors: philox4x32_10, counter 0, key 0.
  auto r = Rng::philox(0, 0, 0);
  EXPECT_EQ(r[0], 0x6627e8d5u);
  EXPECT_EQ(r[1], 0xe169c58du);
  EXPECT_EQ(r[2], 0xbc57ac4cu);
  EXPECT_EQ(r[3], 0x9b00dbd8u);
}

TEST(Rng, StreamsDifferAndStateResumesExactly) {
  Rng a(7), b(7, 1);
  EXPECT_NE(a.next_u32(), b.next_u32());
  Rng c(9);
  for (int i = 0; i < 5; ++i) c.next_u32();
  RngState saved = c.state();
  std::vector<uint32_t> expect;
  for (int i = 0; i < 10; ++i) expect.push_back(c.next_u32());
  Rng d;
  d.set_state(saved);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(d.next_u32(), expect[i]);
}

TEST(Rng, NormalHasUnitMoments) {
  Rng r(1);
  double sum = 0, sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    double z = r.normal();
    sum += z, sq += z * z;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sq / n, 1.0, 0.01);
}

// A run draws each element as its own draw would, whatever the run's start
// and length (eight lanes at a time, the rest one at a time).
TEST(Rng, RunsDrawTheSameBitsAsSingleDraws) {
  for (uint64_t first : {0ull, 5ull, (1ull << 32) - 3}) {
    for (int64_t n : {1, 7, 8, 9, 37}) {
      std::vector<float> normal(static_cast<size_t>(n)), uniform(static_cast<size_t>(n));
      Rng::normal_run(11, 0x123456789abcull, first, n, normal.data());
      Rng::uniform_run(11, 0x123456789abcull, first, n, uniform.data());
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(normal[i], Rng::normal_at(11, 0x123456789abcull, first + i)) << first << "+" << i;
        ASSERT_EQ(uniform[i], Rng::uniform_at(11, 0x123456789abcull, first + i)) << first << "+" << i;
      }
    }
  }
}

// The draws are the words of Philox (the known answer above) through
// uniform's 24 bits and Box-Muller: against glibc's float logarithm and
// cosine on the same words, the same values to a float's rounding.
TEST(Rng, AddressedDrawsAreBoxMullerOnPhiloxsWords) {
  for (uint64_t i = 0; i < 20000; ++i) {
    const std::array<uint32_t, 4> w = Rng::philox(3, 17, i);
    const double u1 = 1.0 - (w[0] >> 8) / 16777216.0, u2 = (w[1] >> 8) / 16777216.0;
    ASSERT_EQ(Rng::uniform_at(3, 17, i), static_cast<float>((w[0] >> 8) / 16777216.0)) << i;
    const double want = std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * M_PI * u2);
    ASSERT_NEAR(Rng::normal_at(3, 17, i), want, 1e-6 * std::max(1.0, std::abs(want))) << i;
  }
}

// Known answers, so a machine or build that drew other bits fails here
// (Note [Machine-independent normals]): the same in -O0, -O3, ASan, and for
// x86-64-v2, x86-64-v3 and AVX-512 when written.
TEST(Rng, NormalDrawsAreTheSameBitsEverywhere) {
  const std::pair<uint64_t, uint32_t> known[] = {{0, 0x3fa530d9u}, {1, 0x3f64053du}, {12345, 0xbfaac10bu}};
  for (const auto& [index, bits] : known) {
    const float z = Rng::normal_at(1337, 99, index);
    uint32_t got;
    std::memcpy(&got, &z, sizeof got);
    EXPECT_EQ(got, bits) << "draw " << index << " is " << z;
  }
}

TEST(Rng, BelowStaysInRange) {
  Rng r(3);
  for (int i = 0; i < 1000; ++i) EXPECT_LT(r.below(17), 17u);
}

}  // namespace artel
