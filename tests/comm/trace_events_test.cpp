// Every op a group's progress engine runs shows up on the timeline when
// tracing is on (core/trace.h), on the row "comm <group name>"; nothing when off.
#include <gtest/gtest.h>

#include <algorithm>

#include "artel/comm/thread_group.h"
#include "artel/core/trace.h"
#include "comm/quick_options.h"

namespace artel::comm {
namespace {

class CommTraceTest : public ::testing::Test {
 protected:
  void SetUp() override { reset(); }
  void TearDown() override { reset(); }
  static void reset() {
    trace::enable(false);
    trace::set_step(-1);
    trace::take();
  }
};

using artel_test::quick;

// An all_reduce, a tagged message from 0 to 1 and a barrier in a subgroup.
void some_ops(ProcessGroup& pg) {
  Tensor t = Tensor::full({16}, 1.f);
  pg.all_reduce(t)->wait();
  if (pg.rank() == 0) pg.send(t, 1, 3)->wait();
  else pg.recv(t, 0, 3)->wait();
  auto sub = pg.new_group({0, 1});
  sub->barrier()->wait();
}

size_t count(const std::vector<trace::Event>& events, const std::string& name, const std::string& track) {
  return std::count_if(events.begin(), events.end(), [&](const trace::Event& e) { return e.name == name && e.track == track; });
}

TEST_F(CommTraceTest, OpsAreEventsWhenTracingIsOn) {
  trace::enable(true);
  trace::set_step(5);
  const int64_t before = trace::now_ns();
  spawn_threads(2, some_ops, quick());
  const int64_t after = trace::now_ns();
  auto events = trace::take();
  EXPECT_EQ(count(events, "all_reduce", "comm world"), 2u);
  EXPECT_EQ(count(events, "send to rank 1 tag 3", "comm world"), 1u);
  EXPECT_EQ(count(events, "recv from rank 0 tag 3", "comm world"), 1u);
  EXPECT_EQ(count(events, "barrier", "comm world/[0,1]"), 2u);
  EXPECT_EQ(events.size(), 6u);
  for (const auto& e : events) {
    EXPECT_EQ(e.category, "comm");
    EXPECT_EQ(e.step, 5);
    EXPECT_EQ(e.micro_batch, -1);
    EXPECT_GE(e.start_ns, before);
    EXPECT_GE(e.dur_ns, 0);
    EXPECT_LE(e.start_ns + e.dur_ns, after);
  }
}

TEST_F(CommTraceTest, NoEventsWhenTracingIsOff) {
  spawn_threads(2, some_ops, quick());
  EXPECT_TRUE(trace::take().empty());
}

TEST_F(CommTraceTest, AnEventIsRecordedBeforeItsWaitReturns) {
  trace::enable(true);
  spawn_threads(1, [](ProcessGroup& pg) {
    Tensor t = Tensor::full({4}, 2.f);
    pg.broadcast(t)->wait();
    auto events = trace::take();
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].name, "broadcast");
  }, quick());
}

}  // namespace
}  // namespace artel::comm
