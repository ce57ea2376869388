// MetricsWriter: DIR/metrics.jsonl, one JSON object per line. The first step
// line is written out at once, later ones at least once a second, evaluation
// lines at once, so `tail -f` follows a run; the trainer flushes before each checkpoint, so a
// killed run's file holds every step its newest checkpoint holds. Not per
// step: a write to the file took 25 µs in a 2.4 ms W1 step, on the reporting
// worker, and every other worker waited for it at the next collective.
//
//   {"step":1,"loss":4.17,"lr":0.001,"tokens_per_s":11950.2,"step_ms":64.3}
//   {"step":250,"val_loss":2.41}                       (gpt)
//   {"step":62,"val_loss":0.21,"val_accuracy":0.94,"elapsed_s":1.9}    (mlp, cnn)
//
// Step lines may carry extra timings (t_comp_ms, t_sync_ms once data
// parallelism splits a step into compute and exposed communication).
//
//   MetricsWriter m(out_dir + "/metrics.jsonl");
//   m.step({.step = 1, .loss = 4.17, .lr = 1e-3, .items_per_s = 11950, .items_name = "tokens_per_s", .step_ms = 64.3});
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "artel/train/memory_report.h"

namespace artel::train {

struct StepMetrics {
  int64_t step = 0;           // 1-based: the k-th optimizer step
  double loss = 0;            // the loss of step k's forward pass
  double lr = 0;              // the learning rate step k applied
  double items_per_s = 0;     // samples or tokens per second of this step
  std::string items_name = "samples_per_s";  // "samples_per_s" | "tokens_per_s"
  double step_ms = 0;         // wall time of the whole step
  std::optional<double> t_comp_ms{};  // forward + backward + optimizer (data parallelism)
  std::optional<double> t_sync_ms{};  // exposed gradient synchronisation (data parallelism)
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // the strategy's own (Strategy::step_record)
};

struct EvalMetrics {
  int64_t step = 0;                     // evaluated after this many steps
  double val_loss = 0;                  // mean cross-entropy over the validation rows used
  std::optional<double> val_accuracy{}; // classifiers
  std::optional<double> elapsed_s{};    // wall time since the run's first step began (time-to-accuracy)
};

class MetricsWriter {
 public:
  // Creates (truncates) the file; throws artel::Error when it cannot.
  explicit MetricsWriter(const std::string& path);
  // A resumed run: keeps the lines of steps <= `last_step` that the file
  // already holds (drops those of steps redone after the checkpoint) and
  // appends after them.
  MetricsWriter(const std::string& path, int64_t last_step);
  void step(const StepMetrics& m);
  void eval(const EvalMetrics& m);
  // {"memory": [worker 0's report, ...]} (bytes by kind, memory_report.h).
  void memory(const std::vector<MemoryReport>& workers);
  // One line of the caller's (a run's summary, e.g. a parameter server's statistics).
  void record(const nlohmann::ordered_json& line);
  // Writes out what is buffered; throws artel::Error when it cannot.
  void flush();
  const std::string& path() const { return path_; }

  static nlohmann::ordered_json to_json(const StepMetrics& m);
  static nlohmann::ordered_json to_json(const EvalMetrics& m);

 private:
  void write(const nlohmann::ordered_json& j);
  std::string path_;
  std::ofstream out_;
  std::chrono::steady_clock::time_point last_flush_{};  // never: the first step line goes out at once
};

}  // namespace artel::train
