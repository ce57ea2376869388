#include "artel/train/trace_export.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "artel/core/error.h"

namespace artel::train {
namespace {

using json = nlohmann::json;
constexpr int64_t kMs = 1'000'000;  // ns

trace::Event ev(const std::string& name, const std::string& category, const std::string& track, int64_t start_ns,
                int64_t dur_ns, int64_t step = -1, int micro_batch = -1) {
  trace::Event e;
  e.name = name;
  e.category = category;
  e.track = track;
  e.start_ns = start_ns;
  e.dur_ns = dur_ns;
  e.step = step;
  e.micro_batch = micro_batch;
  return e;
}

trace::Event compute(const std::string& name, int64_t start_ms, int64_t dur_ms, int micro_batch = -1) {
  return ev(name, "compute", "compute", start_ms * kMs, dur_ms * kMs, -1, micro_batch);
}

size_t occurrences(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + needle.size())) ++n;
  return n;
}

const json* find(const json& events, const std::string& ph, const std::string& name, int pid) {
  for (const auto& e : events)
    if (e["ph"] == ph && e["name"] == name && e["pid"] == pid) return &e;
  return nullptr;
}

TEST(ChromeTrace, HasMetadataAndEventsInMicroseconds) {
  const int64_t t0 = 5'000'000'000;  // steady_clock values are large: the output starts at 0
  std::vector<RankTrace> ranks = {
      {0, "rank 0 (dp 0, pp 0, tp 0)",
       {ev("forward", "compute", "compute", t0 + 1'500, 2'000, 3, 1), ev("all_reduce", "comm", "comm world", t0 + 4'000, 250)}},
      {1, "rank 1 (dp 0, pp 1, tp 0)", {ev("backward", "compute", "compute", t0, 1'000, 3)}},
  };
  json doc = json::parse(chrome_trace_json(ranks));
  const json& events = doc.at("traceEvents");
  ASSERT_TRUE(events.is_array());
  EXPECT_EQ(events.size(), 2u * 2 + 3 * 2 + 3);  // per rank: process name + sort index; per track: 2; events

  for (int r : {0, 1}) {
    const json* name = find(events, "M", "process_name", r);
    ASSERT_NE(name, nullptr);
    EXPECT_EQ((*name)["args"]["name"], ranks[r].label);
    const json* sort = find(events, "M", "process_sort_index", r);
    ASSERT_NE(sort, nullptr);
    EXPECT_EQ((*sort)["args"]["sort_index"], r);
  }
  std::map<std::pair<int, std::string>, int> tid_of;  // (pid, track) -> tid
  for (const auto& e : events)
    if (e["name"] == "thread_name") tid_of[{e["pid"].get<int>(), e["args"]["name"].get<std::string>()}] = e["tid"].get<int>();
  ASSERT_EQ(tid_of.size(), 3u);
  EXPECT_NE((tid_of[{0, "compute"}]), (tid_of[{0, "comm world"}]));

  const json* fwd = find(events, "X", "forward", 0);
  ASSERT_NE(fwd, nullptr);
  EXPECT_EQ((*fwd)["cat"], "compute");
  EXPECT_DOUBLE_EQ((*fwd)["ts"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ((*fwd)["dur"].get<double>(), 2.0);
  EXPECT_EQ((*fwd)["tid"], (tid_of[{0, "compute"}]));
  EXPECT_EQ((*fwd)["args"], (json{{"step", 3}, {"micro_batch", 1}}));

  const json* ar = find(events, "X", "all_reduce", 0);
  ASSERT_NE(ar, nullptr);
  EXPECT_DOUBLE_EQ((*ar)["ts"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ((*ar)["dur"].get<double>(), 0.25);
  EXPECT_EQ((*ar)["tid"], (tid_of[{0, "comm world"}]));
  EXPECT_FALSE(ar->contains("args"));  // neither step nor micro-batch set

  const json* bwd = find(events, "X", "backward", 1);
  ASSERT_NE(bwd, nullptr);
  EXPECT_DOUBLE_EQ((*bwd)["ts"].get<double>(), 0.0);  // the earliest event of all ranks
  EXPECT_EQ((*bwd)["args"], (json{{"step", 3}}));
}

TEST(ChromeTrace, NoEventsIsStillAValidTrace) {
  json doc = json::parse(chrome_trace_json({}));
  EXPECT_TRUE(doc.at("traceEvents").empty());
  doc = json::parse(chrome_trace_json({{2, "rank 2", {}}}));
  EXPECT_EQ(doc.at("traceEvents").size(), 2u);
}

// GPipe, 2 stages, 2 micro-batches of 1 ms per forward and backward:
//   stage 0: F0 [0,1) F1 [1,2)                   B1 [4,5) B0 [5,6)
//   stage 1:          F0 [1,2) F1 [2,3) B1 [3,4) B0 [4,5)
// Window [0, 6) ms; each stage busy 4 ms: idle 1/3.
std::vector<SvgRow> gpipe_rows() {
  return {
      {"stage 0", {compute("forward", 0, 1, 0), compute("forward", 1, 1, 1), compute("backward", 4, 1, 1),
                   compute("backward", 5, 1, 0)}},
      {"stage 1", {compute("forward", 1, 1, 0), compute("forward", 2, 1, 1), compute("backward", 3, 1, 1),
                   compute("backward", 4, 1, 0)}},
  };
}

TEST(Utilisation, GpipeBubbleOfTwoStages) {
  Utilisation u = utilisation(gpipe_rows());
  EXPECT_EQ(u.window_start_ns, 0);
  EXPECT_DOUBLE_EQ(u.window_ms, 6.0);
  ASSERT_EQ(u.busy_ms.size(), 2u);
  EXPECT_DOUBLE_EQ(u.busy_ms[0], 4.0);
  EXPECT_DOUBLE_EQ(u.busy_ms[1], 4.0);
  EXPECT_DOUBLE_EQ(u.idle_share[0], 1.0 - 4.0 / 6.0);
  EXPECT_DOUBLE_EQ(u.idle_share[1], 1.0 - 4.0 / 6.0);
}

TEST(Utilisation, BusyIsTheUnionOfComputeOnly) {
  std::vector<SvgRow> rows = {
      // Overlapping [0,2) and [1,3) and a nested [1,2): 3 ms busy. The comm event neither
      // counts as busy nor widens the window.
      {"a", {compute("forward", 0, 2), compute("backward", 1, 2), compute("optimizer", 1, 1),
             ev("all_reduce", "comm", "comm world", 0, 20 * kMs)}},
      {"b", {compute("forward", 7, 1)}},
      {"c", {}},
  };
  Utilisation u = utilisation(rows);
  EXPECT_DOUBLE_EQ(u.window_ms, 8.0);
  EXPECT_DOUBLE_EQ(u.busy_ms[0], 3.0);
  EXPECT_DOUBLE_EQ(u.busy_ms[1], 1.0);
  EXPECT_DOUBLE_EQ(u.busy_ms[2], 0.0);
  EXPECT_DOUBLE_EQ(u.idle_share[0], 0.625);
  EXPECT_DOUBLE_EQ(u.idle_share[1], 0.875);
  EXPECT_DOUBLE_EQ(u.idle_share[2], 1.0);
}

TEST(Utilisation, UnequalStagesImplyTheIdleOfTheirTimeline) {
  // GPipe, M = 2: stage 1's pieces take twice stage 0's, so stage 0 waits
  // for it: window 10 ms = sum of costs (2 + 4) + (M - 1) x slowest (4).
  std::vector<SvgRow> rows = {
      {"stage 0", {compute("forward", 0, 1, 0), compute("forward", 1, 1, 1), compute("backward", 7, 1, 1),
                   compute("backward", 9, 1, 0)}},
      {"stage 1", {compute("forward", 1, 2, 0), compute("forward", 3, 2, 1), compute("backward", 5, 2, 1),
                   compute("backward", 7, 2, 0)}},
  };
  Utilisation u = utilisation(rows);
  EXPECT_DOUBLE_EQ(u.window_ms, 10.0);
  std::vector<double> implied = idle_of_unequal_stages(u.busy_ms, 2, parallel::ScheduleKind::gpipe);
  ASSERT_EQ(implied.size(), 2u);
  EXPECT_DOUBLE_EQ(implied[0], u.idle_share[0]);  // 0.6
  EXPECT_DOUBLE_EQ(implied[1], u.idle_share[1]);  // 0.2
  EXPECT_DOUBLE_EQ(implied[0], 0.6);
}

TEST(Utilisation, EqualStagesImplyTheIdealBubble) {
  for (auto kind : {parallel::ScheduleKind::gpipe, parallel::ScheduleKind::one_f_one_b})
    for (auto [p, m] : {std::pair{2, 8}, {4, 8}, {4, 1}, {3, 5}}) {
      std::vector<double> implied = idle_of_unequal_stages(std::vector<double>(static_cast<size_t>(p), 7.0 * m), m, kind);
      for (double idle : implied) EXPECT_NEAR(idle, (p - 1.0) / (m + p - 1.0), 1e-12) << "P " << p << " M " << m;
    }
  // The last stage 25 % slower: the others wait for it, it waits only to fill.
  std::vector<double> implied = idle_of_unequal_stages({8.0, 10.0}, 8, parallel::ScheduleKind::gpipe);
  EXPECT_NEAR(implied[0], 3.0 / 11, 1e-12);
  EXPECT_NEAR(implied[1], 1.0 / 11, 1e-12);
  EXPECT_EQ(idle_of_unequal_stages({0.0, 0.0}, 8, parallel::ScheduleKind::gpipe), (std::vector<double>{0.0, 0.0}));
}

TEST(Utilisation, NoComputeMeansAnEmptyWindow) {
  Utilisation u = utilisation({{"a", {ev("send", "comm", "comm world", 0, kMs)}}});
  EXPECT_DOUBLE_EQ(u.window_ms, 0.0);
  EXPECT_DOUBLE_EQ(u.busy_ms[0], 0.0);
  EXPECT_DOUBLE_EQ(u.idle_share[0], 0.0);
}

TEST(PipelineSvg, DrawsForwardAndBackwardBlocksPerStage) {
  auto rows = gpipe_rows();
  rows[0].label = "stage 0 <first>";
  rows[1].events.push_back(compute("optimizer", 5, 1));                            // compute, not drawn
  rows[1].events.push_back(ev("forward", "comm", "comm world", 0, kMs));            // not compute, not drawn
  const std::string svg = pipeline_svg(rows, "GPipe & friends");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_EQ(occurrences(svg, "class=\"forward\""), 4u);
  EXPECT_EQ(occurrences(svg, "class=\"backward\""), 4u);
  EXPECT_EQ(occurrences(svg, "class=\"lane\""), 2u);
  EXPECT_EQ(occurrences(svg, "<rect"), 1 + 2 + 8 + 3u);  // background, lanes, blocks, legend swatches
  EXPECT_EQ(occurrences(svg, "<text"), occurrences(svg, "</text>"));
  EXPECT_EQ(occurrences(svg, "<title>"), 8u);
  EXPECT_EQ(svg.find("<script"), std::string::npos);
  EXPECT_NE(svg.find("stage 0 &lt;first&gt;"), std::string::npos);
  EXPECT_NE(svg.find(">stage 1</text>"), std::string::npos);
  EXPECT_NE(svg.find(">GPipe &amp; friends</text>"), std::string::npos);
  // Stage 1 is busy 5 of 6 ms with the optimizer step; stage 0 4 of 6.
  EXPECT_NE(svg.find(">idle 33.33%</text>"), std::string::npos);
  EXPECT_NE(svg.find(">idle 16.67%</text>"), std::string::npos);
  EXPECT_NE(svg.find("time (ms)"), std::string::npos);
  EXPECT_NE(svg.find(">forward</text>"), std::string::npos);   // legend
  EXPECT_NE(svg.find(">backward</text>"), std::string::npos);
  // 1 ms of 6 over 660 px is wide enough for a micro-batch number.
  EXPECT_NE(svg.find(">1</text>"), std::string::npos);
  EXPECT_NE(svg.find("forward micro-batch 1, 1.00 ms"), std::string::npos);
}

TEST(PipelineSvg, EmptyRowsStillMakeAPicture) {
  const std::string svg = pipeline_svg({{"stage 0", {}}}, "nothing");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(occurrences(svg, "class=\"forward\""), 0u);
  EXPECT_NE(svg.find("no compute events"), std::string::npos);
}

TEST(WriteTextFile, ReplacesTheFileWhole) {
  const std::string dir = ::testing::TempDir() + "artel_trace_export_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/out.json";
  write_text_file(path, "first");
  write_text_file(path, "second, longer");
  std::ifstream in(path);
  std::stringstream got;
  got << in.rdbuf();
  EXPECT_EQ(got.str(), "second, longer");
  size_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1u);  // no temporary left behind
  std::filesystem::remove_all(dir);
}

TEST(WriteTextFile, FailureNamesThePath) {
  const std::string path = ::testing::TempDir() + "artel_no_such_dir_" + std::to_string(::getpid()) + "/trace.json";
  try {
    write_text_file(path, "x");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace artel::train
