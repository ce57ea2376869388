#include "artel/train/metrics_writer.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "artel/core/error.h"

namespace artel::train {
namespace {

std::vector<nlohmann::json> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(MetricsWriter, WritesOneObjectPerLine) {
  std::string path = ::testing::TempDir() + "artel_metrics_test_" + std::to_string(::getpid()) + ".jsonl";
  MetricsWriter m(path);
  m.step({.step = 1, .loss = 4.25, .lr = 1e-3, .items_per_s = 1000, .items_name = "tokens_per_s", .step_ms = 64.5});
  // The first step line is written out at once: readable before the writer closes.
  auto lines = read_lines(path);
  ASSERT_EQ(lines.size(), 1u);
  std::ifstream raw(path);
  std::string first;
  std::getline(raw, first);  // keys in a fixed, readable order: step first
  EXPECT_EQ(first, R"({"step":1,"loss":4.25,"lr":0.001,"tokens_per_s":1000.0,"step_ms":64.5})");
  m.step({.step = 2, .loss = 4.0, .lr = 1e-3, .items_per_s = 10, .step_ms = 1, .t_comp_ms = 0.75, .t_sync_ms = 0.25});
  m.flush();  // what the trainer does before a checkpoint
  EXPECT_EQ(read_lines(path).size(), 2u);
  m.step({.step = 3, .loss = 4.0, .lr = 1e-3, .items_per_s = 10, .step_ms = 1});
  m.eval({.step = 3, .val_loss = 3.5});  // an evaluation line writes out the steps before it too
  m.eval({.step = 3, .val_loss = 0.5, .val_accuracy = 0.875});
  lines = read_lines(path);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[1]["samples_per_s"], 10.0);
  EXPECT_EQ(lines[1]["t_comp_ms"], 0.75);
  EXPECT_EQ(lines[1]["t_sync_ms"], 0.25);
  EXPECT_EQ(lines[3], nlohmann::json::parse(R"({"step":3,"val_loss":3.5})"));
  EXPECT_EQ(lines[4]["val_accuracy"], 0.875);
  EXPECT_FALSE(lines[0].contains("t_sync_ms"));
  std::remove(path.c_str());
}

TEST(MetricsWriter, NonFiniteValuesStayValidJson) {
  auto j = MetricsWriter::to_json(StepMetrics{.step = 3, .loss = NAN, .lr = 1, .items_per_s = INFINITY});
  EXPECT_TRUE(j["loss"].is_null());
  EXPECT_NO_THROW(nlohmann::json::parse(j.dump()));
}

TEST(MetricsWriter, UnwritablePathIsAnError) {
  EXPECT_THROW(MetricsWriter("/nonexistent-dir/metrics.jsonl"), Error);
}

}  // namespace
TEST(MetricsWriter, ResumedRunKeepsTheLinesUpToItsCheckpoint) {
  std::string path = ::testing::TempDir() + "artel_metrics_resume_" + std::to_string(::getpid()) + ".jsonl";
  {
    MetricsWriter m(path);
    for (int64_t k = 1; k <= 3; ++k) m.step({.step = k, .loss = 1.0 * k});
    m.eval({.step = 2, .val_loss = 0.5});
  }
  {
    MetricsWriter m(path, 2);  // resumed after step 2: step 3 is redone
    m.step({.step = 3, .loss = 7});
  }
  std::ifstream in(path);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[1]["step"], 2);
  EXPECT_EQ(lines[2]["val_loss"], 0.5);
  EXPECT_EQ(lines[3]["loss"], 7.0);
  std::remove(path.c_str());
}

}  // namespace artel::train
