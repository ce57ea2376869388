#include "artel/core/trace.h"

#include <gtest/gtest.h>

#include <thread>

namespace artel::trace {
namespace {

// The recorder is process-wide: every test starts and ends with it off and empty.
class TraceTest : public ::testing::Test {
 protected:
  void SetUp() override { reset(); }
  void TearDown() override { reset(); }
  static void reset() {
    enable(false);
    set_step(-1);
    take();
  }
};

Event event(const std::string& name, int64_t start = 10, int64_t dur = 5) {
  Event e;
  e.name = name;
  e.category = "compute";
  e.track = "compute";
  e.start_ns = start;
  e.dur_ns = dur;
  return e;
}

TEST_F(TraceTest, OffByDefaultRecordsNothing) {
  EXPECT_FALSE(enabled());
  record(event("forward"));
  { Scope s("backward", "compute", "compute"); }
  EXPECT_TRUE(take().empty());
}

TEST_F(TraceTest, RecordsWhenOnAndTakeClears) {
  enable(true);
  EXPECT_TRUE(enabled());
  record(event("forward", 100, 20));
  record(event("backward", 130, 40));
  auto got = take();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].name, "forward");
  EXPECT_EQ(got[0].start_ns, 100);
  EXPECT_EQ(got[0].dur_ns, 20);
  EXPECT_EQ(got[1].name, "backward");
  EXPECT_TRUE(take().empty());
  enable(false);
  record(event("ignored"));
  EXPECT_TRUE(take().empty());
}

TEST_F(TraceTest, ScopeRecordsItsLifetime) {
  enable(true);
  const int64_t before = now_ns();
  { Scope s("forward", "compute", "compute", 3); }
  const int64_t after = now_ns();
  auto got = take();
  ASSERT_EQ(got.size(), 1u);
  const Event& e = got[0];
  EXPECT_EQ(e.name, "forward");
  EXPECT_EQ(e.category, "compute");
  EXPECT_EQ(e.track, "compute");
  EXPECT_EQ(e.micro_batch, 3);
  EXPECT_EQ(e.step, -1);
  EXPECT_GE(e.start_ns, before);
  EXPECT_GE(e.dur_ns, 0);
  EXPECT_LE(e.start_ns + e.dur_ns, after);
}

TEST_F(TraceTest, ScopeBegunWhileOffStaysSilent) {
  {
    Scope s("forward", "compute", "compute");
    enable(true);
  }
  EXPECT_TRUE(take().empty());
}

TEST_F(TraceTest, SetStepStampsLaterEvents) {
  enable(true);
  record(event("before"));
  set_step(7);
  EXPECT_EQ(current_step(), 7);
  record(event("unstamped"));
  Event explicit_step = event("explicit");
  explicit_step.step = 2;
  record(explicit_step);
  { Scope s("scoped", "step", "compute"); }
  auto got = take();
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].step, -1);
  EXPECT_EQ(got[1].step, 7);
  EXPECT_EQ(got[2].step, 2);
  EXPECT_EQ(got[3].step, 7);
}

TEST_F(TraceTest, TwoThreadsRecordEverything) {
  enable(true);
  constexpr int kPerThread = 2000;
  auto work = [](const std::string& who) {
    for (int i = 0; i < kPerThread; ++i) record(event(who, i));
  };
  std::thread a(work, "a"), b(work, "b");
  a.join();
  b.join();
  auto got = take();
  ASSERT_EQ(got.size(), 2u * kPerThread);
  // Each thread's events keep their order.
  int64_t next_a = 0, next_b = 0;
  for (const auto& e : got) {
    ASSERT_TRUE(e.name == "a" || e.name == "b") << e.name;
    EXPECT_EQ(e.start_ns, e.name == "a" ? next_a++ : next_b++);
  }
  EXPECT_EQ(next_a, kPerThread);
  EXPECT_EQ(next_b, kPerThread);
}

}  // namespace
}  // namespace artel::trace
