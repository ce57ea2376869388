#include "artel/train/trace_phases.h"

#include <gtest/gtest.h>

namespace artel::train {
namespace {

constexpr int64_t kUs = 1'000;  // ns

trace::Event phase(const std::string& name, const std::string& track, int64_t step, int64_t dur_us) {
  trace::Event e;
  e.name = name;
  e.category = track == "compute" ? "compute" : "comm";
  e.track = track;
  e.dur_ns = dur_us * kUs;
  e.step = step;
  return e;
}

// Steps 1-8 of one worker: forward 100 + 2k us in step k, but 900 in step 1 (a
// warm-up); two all-gathers a step of 10 and 30 us; step 4 also evaluates.
RankTrace worker(int rank) {
  RankTrace r{rank, "rank " + std::to_string(rank), {}};
  for (int64_t k = 1; k <= 8; ++k) {
    r.events.push_back(phase("forward", "compute", k, k == 1 ? 900 : 100 + 2 * k));
    r.events.push_back(phase("all_gather", "comm world", k, 10));
    r.events.push_back(phase("all_gather", "comm world", k, 30));
    r.events.push_back(phase("send to rank 1 tag " + std::to_string(k), "comm world", k, 5));
    if (k == 4) r.events.push_back(phase("evaluate", "compute", k, 5000));
  }
  r.events.push_back(phase("save", "compute", -1, 7000));  // no step: not a step's phase
  return r;
}

TEST(TracePhases, MediansPerStepOfEachWorkersPhasesAfterTheWarmup) {
  const std::vector<RankTrace> ranks = {worker(0), worker(1)};
  EXPECT_EQ(first_counted_step(ranks), 3);  // 8 steps: 2 left out
  const std::vector<PhaseTimes> t = trace_phases(ranks, 3);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[1].rank, 1);
  EXPECT_EQ(t[0].first_step, 3);
  EXPECT_EQ(t[0].last_step, 8);
  ASSERT_EQ(t[0].tracks.size(), 2u);
  EXPECT_EQ(t[0].tracks[0].track, "compute");
  const std::vector<PhaseTime>& compute = t[0].tracks[0].phases;
  ASSERT_EQ(compute.size(), 2u);
  EXPECT_EQ(compute[0].name, "forward");
  EXPECT_DOUBLE_EQ(compute[0].median_ms, (0.110 + 0.112) / 2);  // steps 3-8: 106 .. 116 us
  EXPECT_DOUBLE_EQ(compute[0].count, 1.0);
  EXPECT_EQ(compute[1].name, "evaluate");  // the steps it ran in, once in six
  EXPECT_DOUBLE_EQ(compute[1].median_ms, 5.0);
  EXPECT_DOUBLE_EQ(compute[1].count, 1.0 / 6);
  const std::vector<PhaseTime>& comm = t[0].tracks[1].phases;
  ASSERT_EQ(comm.size(), 2u);
  EXPECT_EQ(comm[0].name, "all_gather");  // a step's two summed
  EXPECT_DOUBLE_EQ(comm[0].median_ms, 0.040);
  EXPECT_DOUBLE_EQ(comm[0].count, 2.0);
  EXPECT_EQ(comm[1].name, "send to rank 1");  // every tag one phase
  EXPECT_DOUBLE_EQ(comm[1].count, 1.0);

  const std::string table = phases_table(t);
  EXPECT_NE(table.find("over steps 3-8"), std::string::npos) << table;
  EXPECT_NE(table.find("rank 0 compute: forward 0.111, evaluate 5.000 x0.17\n"), std::string::npos) << table;
  EXPECT_NE(table.find("rank 1 comm world: all_gather 0.040 x2, send to rank 1 0.005\n"), std::string::npos) << table;
  EXPECT_EQ(table.find("save"), std::string::npos) << table;
}

TEST(TracePhases, ARunWithoutStepsHasNoTable) {
  RankTrace r{0, "rank 0", {phase("save", "compute", -1, 10)}};
  EXPECT_EQ(first_counted_step({r}), 0);
  const std::vector<PhaseTimes> t = trace_phases({r}, 0);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_TRUE(t[0].tracks.empty());
  EXPECT_EQ(phases_table(t), "");
}

}  // namespace
}  // namespace artel::train
