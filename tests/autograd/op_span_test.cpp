// OpSpan: each op's forward and backward on the trace, outermost spans only.
#include "artel/autograd/op_span.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "artel/autograd/ops.h"

namespace artel::autograd {
namespace {

// Tracing on for one test, and the recorder empty before and after it.
struct Tracing {
  Tracing() {
    trace::take();
    trace::enable(true);
    trace::set_step(3);
  }
  ~Tracing() {
    trace::enable(false);
    trace::set_step(-1);
    trace::take();
  }
};

std::vector<std::string> names_on(const std::vector<trace::Event>& events, const std::string& track) {
  std::vector<std::string> names;
  for (const trace::Event& e : events)
    if (e.track == track) names.push_back(e.name);
  return names;
}

TEST(OpSpan, EachOpsForwardAndBackwardIsASpanOfTheStep) {
  Tracing tracing;
  Variable x(Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}), true);
  Variable w(Tensor::from_vector({1, -1, 2, 0.5f, 1, -2}, {2, 3}), true);
  Variable b(Tensor::from_vector({0.1f, -0.2f}, {2}), true);
  Variable loss = sum(relu(linear(x, w, b)));
  loss.backward();
  const std::vector<trace::Event> events = trace::take();
  EXPECT_EQ(names_on(events, "forward ops"), (std::vector<std::string>{"linear", "relu", "sum"}));
  EXPECT_EQ(names_on(events, "backward ops"), (std::vector<std::string>{"sum", "relu", "linear"}));
  for (const trace::Event& e : events) {
    EXPECT_EQ(e.category, "op") << e.name;
    EXPECT_EQ(e.step, 3) << e.name;
    EXPECT_GE(e.dur_ns, 0) << e.name;
  }
  EXPECT_EQ(events.size(), 6u);
}

TEST(OpSpan, AnOpMadeOfOpsCountsOnce) {
  Tracing tracing;
  {
    const OpSpan outer("my_block");
    Variable x(Tensor::from_vector({1, -2}, {2}), true);
    Variable y = mul(relu(x), 3.0f);  // ops inside the block: their time is the block's
    const OpSpan inner("inner");
  }
  { const OpSpan after("after"); }  // the nest closed: the next op is outermost again
  std::vector<trace::Event> events = trace::take();
  EXPECT_EQ(names_on(events, "forward ops"), (std::vector<std::string>{"my_block", "after"}));
}

TEST(OpSpan, RecordsNothingWhenTracingIsOff) {
  trace::take();
  ASSERT_FALSE(trace::enabled());
  Variable x(Tensor::from_vector({1, -2}, {2}), true);
  sum(relu(x)).backward();
  EXPECT_TRUE(trace::take().empty());
}

}  // namespace
}  // namespace artel::autograd
