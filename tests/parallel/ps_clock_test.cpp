#include "artel/parallel/ps_clock.h"

#include <gtest/gtest.h>

#include "artel/core/error.h"

namespace artel::parallel {
namespace {

TEST(PsClock, BspKeepsEveryWorkerInLockstep) {
  PsClock clock(3, 0);
  EXPECT_TRUE(clock.may_start(0));
  clock.advance(0);
  EXPECT_FALSE(clock.may_start(0));  // one ahead of the others
  EXPECT_TRUE(clock.may_start(1));
  clock.advance(1), clock.advance(2);
  EXPECT_TRUE(clock.may_start(0));
  EXPECT_EQ(clock.required_view(0), 1);  // every update of clock 0
}

// A stalled worker: no worker ever gets more than s clocks ahead of it, and
// every read requires all updates of the clocks below c - s.
TEST(PsClock, SspBoundsHowFarAheadAWorkerRuns) {
  const int64_t s = 2;
  PsClock clock(4, s);
  for (int round = 0; round < 10; ++round)
    for (int w = 1; w < 4; ++w)  // worker 0 stalls at clock 0
      if (clock.may_start(w)) {
        EXPECT_GE(clock.required_view(w), clock.clock(w) - s);
        clock.advance(w);
      }
  for (int w = 1; w < 4; ++w) {
    EXPECT_EQ(clock.clock(w), s + 1) << "ran clocks 0.." << s << " and waits";
    EXPECT_FALSE(clock.may_start(w));
    EXPECT_EQ(clock.required_view(w), 1);  // clock 0 of every worker, the stalled one included
  }
  clock.advance(0);
  EXPECT_TRUE(clock.may_start(1));
}

TEST(PsClock, AspNeverWaits) {
  PsClock clock(2, std::nullopt);
  for (int i = 0; i < 100; ++i) {
    EXPECT_TRUE(clock.may_start(0));
    clock.advance(0);
  }
  EXPECT_EQ(clock.required_view(0), 0);
  EXPECT_EQ(clock.min_clock(), 0);
}

TEST(PsClock, ADroppedWorkerNoLongerHoldsTheOthersBack) {
  PsClock clock(3, 1);
  clock.advance(0), clock.advance(0);
  EXPECT_FALSE(clock.may_start(0));
  clock.drop(1), clock.drop(2);
  EXPECT_EQ(clock.live_workers(), 1);
  EXPECT_TRUE(clock.may_start(0));
  EXPECT_THROW(clock.advance(1), Error);
}

TEST(PsClock, RefusesNonsense) {
  EXPECT_THROW(PsClock(0, 1), Error);
  EXPECT_THROW(PsClock(2, -1), Error);
  PsClock clock(2, 1);
  EXPECT_THROW(clock.clock(2), Error);
}

TEST(StalenessHistogram, CountsReadsByClocksMissing) {
  StalenessHistogram h;
  EXPECT_EQ(h.max(), 0);
  EXPECT_EQ(h.mean(), 0);
  h.record(0), h.record(2), h.record(2);
  StalenessHistogram other;
  other.record(5);
  h.merge(other);
  EXPECT_EQ(h.reads(), 4);
  EXPECT_EQ(h.max(), 5);
  EXPECT_DOUBLE_EQ(h.mean(), 9.0 / 4);
  EXPECT_EQ(h.counts().at(2), 2);
  EXPECT_THROW(h.record(-1), Error);
}

}  // namespace
}  // namespace artel::parallel
