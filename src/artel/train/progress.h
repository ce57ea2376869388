// Progress: what a person watching a run sees. On a terminal, one bar redrawn
// in place (step/total, loss, throughput, ETA); otherwise (a log file, a pipe,
// a CI job) plain lines every `log_every` steps, so logs stay readable. Eval
// results are always printed as their own line.
//
//   Progress p({.total_steps = 1000, .unit = "tok/s", .terminal = isatty(1)}, std::cout);
//   p.step(k, loss, tokens_per_s);     // after each step
//   p.eval(k, val_loss, std::nullopt);
//   p.finish();                        // ends the bar's line
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

namespace artel::train {

struct ProgressOptions {
  int64_t total_steps = 1;  // >= 1
  int64_t first_step = 1;   // a resumed run starts later; the ETA counts from here
  std::string unit = "samples/s";
  bool terminal = false;    // redraw a bar in place instead of printing lines
  int64_t log_every = 0;    // plain-line interval; 0 = about 20 lines per run
  double redraw_s = 0.1;    // a terminal bar is redrawn at most this often (and at the last step)
};

class Progress {
 public:
  Progress(ProgressOptions opts, std::ostream& os);
  void step(int64_t k, double loss, double items_per_s);
  // Data parallelism: also shows the step's compute and exposed sync time,
  // "... | comp 41.2 ms sync 0.8 ms | eta 48s".
  void step(int64_t k, double loss, double items_per_s, double comp_ms, double sync_ms);
  void eval(int64_t k, double val_loss, std::optional<double> val_accuracy);
  // Prints a message on its own line without breaking the bar.
  void note(const std::string& line);
  void finish();

  // "1:02:03", "4:05" or "12s": a duration for humans.
  static std::string format_duration(double seconds);
  // "12.3k", "950.0": a rate for humans.
  static std::string format_rate(double per_s);

 private:
  std::string status(int64_t k, double loss, double items_per_s, const std::string& timing) const;
  void step_with(int64_t k, std::string line);
  void clear_bar();

  using Clock = std::chrono::steady_clock;
  ProgressOptions opts_;
  std::ostream& os_;
  Clock::time_point start_;
  Clock::time_point last_draw_{};
  bool bar_shown_ = false;
  int64_t last_step_ = 0;
  std::string last_status_;
  std::string last_bar_;
};

}  // namespace artel::train
