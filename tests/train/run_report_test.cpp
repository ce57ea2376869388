#include "artel/train/run_report.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "artel/core/error.h"

namespace artel::train {
namespace {

std::vector<nlohmann::json> data_parallel_run(int steps) {
  std::vector<nlohmann::json> lines;
  for (int k = 1; k <= steps; ++k) {
    lines.push_back({{"step", k}, {"loss", 4.0 / k}, {"tokens_per_s", 1000.0 + k}, {"t_comp_ms", 3.0}, {"t_sync_ms", 0.5}});
    if (k % 10 == 0) lines.push_back({{"step", k}, {"val_loss", 4.5 / k}, {"elapsed_s", 0.1 * k}});
  }
  return lines;
}

TEST(RunReport, DrawsLossThroughputAndComputeAgainstSync) {
  const std::string svg = run_report_svg(data_parallel_run(50), "runs/x");
  for (const char* part : {"<svg", "runs/x", "class=\"train loss\"", "class=\"validation loss\"", "class=\"tokens/s\"",
                           "class=\"T_comp (ms)\"", "class=\"exposed T_sync (ms)\"", "<circle", "</svg>"})
    EXPECT_NE(svg.find(part), std::string::npos) << part;
  EXPECT_EQ(svg.find("nothing recorded"), std::string::npos);
}

TEST(RunReport, LongRunsAreThinnedAndAWorkerAloneShowsItsStepTime) {
  std::vector<nlohmann::json> lines;
  for (int k = 1; k <= 10000; ++k) lines.push_back({{"step", k}, {"loss", 1.0}, {"samples_per_s", 5.0}, {"step_ms", 2.0}});
  const std::string svg = run_report_svg(lines, "long");
  const size_t at = svg.find("class=\"train loss\" d=\"");
  ASSERT_NE(at, std::string::npos);
  const std::string path = svg.substr(at, svg.find('"', at + 22) - at);
  EXPECT_LE(std::count(path.begin(), path.end(), 'L'), 600);  // averaged into at most 600 points
  EXPECT_NE(svg.find("class=\"samples/s\""), std::string::npos);
  EXPECT_NE(svg.find("step (ms), one worker"), std::string::npos);
}

TEST(RunReport, ARunStillWritingIsDrawnWithoutItsHalfLine) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / ("artel_run_report_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream f(dir / "metrics.jsonl");
    for (const nlohmann::json& j : data_parallel_run(20)) f << j.dump() << "\n";
    f << "{\"step\": 21, \"lo";  // the writer is mid-line
  }
  EXPECT_EQ(read_metrics((dir / "metrics.jsonl").string()).size(), 22u);
  EXPECT_EQ(write_run_report(dir.string()), (dir / "report.svg").string());
  EXPECT_TRUE(std::filesystem::exists(dir / "report.svg"));
  EXPECT_THROW(read_metrics((dir / "none.jsonl").string()), Error);
  std::filesystem::remove_all(dir);
}

// A line that no writer leaves behind: not the last, or not begun as a line
// of metrics is. Drawing the rest would show a run that is not there.
TEST(RunReport, AFileOfOtherLinesIsRefusedNamingTheLine) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / ("artel_run_report_bad_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "metrics.jsonl").string();
  auto refusal = [&](const std::string& text) -> std::string {
    std::ofstream(path) << text;
    try {
      read_metrics(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(refusal("{\"step\": 1}\n{\"step\": 2, \"lo\n{\"step\": 3}\n").find("line 2 is not a JSON object"),
            std::string::npos);
  EXPECT_NE(refusal("garbage\n").find("line 1 is not a JSON object: garbage"), std::string::npos);
  EXPECT_NE(refusal(std::string("\x7f" "ELF\x02\x01", 6)).find("line 1 is not a JSON object: \\x7fELF"), std::string::npos);
  EXPECT_EQ(refusal("{\"step\": 1}\n\n{\"step\": 2}\n"), "");  // blank lines are nothing
  // A drawn field of another type was skipped in silence; null is a NaN's gap.
  EXPECT_NE(refusal("{\"step\": 1, \"loss\": 2.5}\n{\"step\": 2, \"loss\": \"2.4\"}\n")
                .find("line 2: \"loss\" is string, not a number: \"2.4\""),
            std::string::npos);
  EXPECT_NE(refusal("{\"step\": [1]}\n").find("line 1: \"step\" is array, not a number"), std::string::npos);
  EXPECT_EQ(refusal("{\"step\": 1, \"loss\": null, \"note\": \"any\"}\n"), "");
  // A directory in its place read as an empty run, and the report drew nothing without a word.
  std::filesystem::remove(path);
  std::filesystem::create_directory(path);
  try {
    read_metrics(path);
    ADD_FAILURE() << "a directory read as metrics";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("metrics file " + path + " is a directory, not a file"), std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace artel::train
