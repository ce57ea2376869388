#include "artel/core/rng.h"

#include <gtest/gtest.h>

#include <cmath>

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

TEST(Rng, BelowStaysInRange) {
  Rng r(3);
  for (int i = 0; i < 1000; ++i) EXPECT_LT(r.below(17), 17u);
}

}  // namespace artel
