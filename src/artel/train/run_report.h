// The run report: a run's metrics.jsonl drawn as one SVG, three panels
// against the step —
//   1. training loss (averaged into at most 600 points) and validation loss
//      (each evaluation);
//   2. throughput, tokens/s or samples/s;
//   3. T_comp and exposed T_sync per step, in ms (a worker alone: its step time).
// Written to OUT/report.svg at the end of a run and by `artel report RUN_DIR`
// for any run, one still writing included: its last line, half-written, is
// skipped.
//
//   write_text_file("report.svg", run_report_svg(read_metrics("runs/gpt/metrics.jsonl"), "runs/gpt"));
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace artel::train {

// Every line of a metrics.jsonl that parses as a JSON object, in order; an
// unfinished last line (a run still writing) is left out. Throws naming the
// file when it cannot be opened, and the line when any other line is not a
// JSON object.
std::vector<nlohmann::json> read_metrics(const std::string& path);

std::string run_report_svg(const std::vector<nlohmann::json>& lines, const std::string& title);

// RUN_DIR/metrics.jsonl -> RUN_DIR/report.svg (atomically); returns the path written.
std::string write_run_report(const std::string& run_dir);

}  // namespace artel::train
