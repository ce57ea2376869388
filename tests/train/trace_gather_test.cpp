#include "artel/train/trace_gather.h"

#include <gtest/gtest.h>

#include <mutex>

#include "artel/comm/thread_group.h"
#include "artel/core/error.h"

namespace artel::train {
namespace {

// Rank r's events: r of them (rank 0 none, so the padding is exercised), with
// names that need escaping.
std::vector<trace::Event> events_of(int rank) {
  std::vector<trace::Event> out;
  for (int i = 0; i < rank * 3; ++i) {
    trace::Event e;
    e.name = i % 2 ? "send to rank " + std::to_string(i) + " tag \"7\"" : "forward \xc3\xa9";
    e.category = i % 2 ? "comm" : "compute";
    e.track = i % 2 ? "comm world/[0,1]" : "compute";
    e.start_ns = 9'000'000'000'000 + rank * 1000 + i;
    e.dur_ns = 10 + i;
    e.step = i % 3 ? 41 : -1;
    e.micro_batch = i % 4 ? i : -1;
    out.push_back(e);
  }
  return out;
}

void expect_same(const std::vector<trace::Event>& got, const std::vector<trace::Event>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_EQ(got[i].category, want[i].category);
    EXPECT_EQ(got[i].track, want[i].track);
    EXPECT_EQ(got[i].start_ns, want[i].start_ns);
    EXPECT_EQ(got[i].dur_ns, want[i].dur_ns);
    EXPECT_EQ(got[i].step, want[i].step);
    EXPECT_EQ(got[i].micro_batch, want[i].micro_batch);
  }
}

comm::GroupOptions quick() {
  comm::GroupOptions o;
  o.timeout = std::chrono::seconds(30);
  o.registered_bytes = 1 << 20;
  return o;
}

TEST(GatherTraces, RankZeroGetsEveryRanksTraceInOrder) {
  std::mutex mu;
  std::vector<RankTrace> at_root;
  std::vector<size_t> others_got;
  comm::spawn_threads(3, [&](comm::ProcessGroup& pg) {
    // Each rank passes its own events: the recorder is process-wide and these ranks are threads.
    auto got = gather_traces(pg, "rank " + std::to_string(pg.rank()) + " (pp " + std::to_string(pg.rank()) + ")",
                             events_of(pg.rank()));
    std::lock_guard lock(mu);
    if (pg.rank() == 0) at_root = std::move(got);
    else others_got.push_back(got.size());
  }, quick());
  EXPECT_EQ(others_got, (std::vector<size_t>{0, 0}));
  ASSERT_EQ(at_root.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE(r);
    EXPECT_EQ(at_root[r].rank, r);
    EXPECT_EQ(at_root[r].label, "rank " + std::to_string(r) + " (pp " + std::to_string(r) + ")");
    expect_same(at_root[r].events, events_of(r));
  }
}

TEST(GatherTraces, OneRankGroup) {
  comm::spawn_threads(1, [&](comm::ProcessGroup& pg) {
    auto got = gather_traces(pg, "alone", events_of(2));
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].label, "alone");
    expect_same(got[0].events, events_of(2));
  }, quick());
}

TEST(GatherTraces, EncodeDecodeRoundTrip) {
  RankTrace r = decode_rank_trace(4, encode_rank_trace("rank 4", events_of(3)));
  EXPECT_EQ(r.rank, 4);
  EXPECT_EQ(r.label, "rank 4");
  expect_same(r.events, events_of(3));
}

std::string error_of(std::string_view bytes) {
  try {
    decode_rank_trace(2, bytes);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GatherTraces, MalformedDataIsAOneLineErrorNamingTheRank) {
  for (std::string_view bad : {std::string_view("{\"label\": \n oops"), std::string_view("[1, 2]"),
                               std::string_view(R"({"label": "x", "events": [[1, 2, 3]]})"),
                               std::string_view(R"({"label": "x", "events": [["a", "b", "c", 1, 2, 3, "4"]]})"),
                               std::string_view(R"({"label": 7, "events": []})"), std::string_view("")}) {
    SCOPED_TRACE(std::string(bad));
    const std::string msg = error_of(bad);
    EXPECT_NE(msg.find("malformed trace data from rank 2"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace artel::train
