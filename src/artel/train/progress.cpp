#include "artel/train/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace artel::train {

Progress::Progress(ProgressOptions opts, std::ostream& os) : opts_(std::move(opts)), os_(os), start_(Clock::now()) {
  opts_.total_steps = std::max<int64_t>(1, opts_.total_steps);
  if (opts_.log_every <= 0) opts_.log_every = std::max<int64_t>(1, (opts_.total_steps - opts_.first_step + 1) / 20);
}

std::string Progress::format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  auto s = static_cast<int64_t>(std::lround(seconds));
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)(s / 3600), (long long)(s / 60 % 60), (long long)(s % 60));
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%lld:%02lld", (long long)(s / 60), (long long)(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%llds", (long long)s);
  return buf;
}

std::string Progress::format_rate(double per_s) {
  char buf[32];
  if (per_s >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2fM", per_s / 1e6);
  else if (per_s >= 1e4)
    std::snprintf(buf, sizeof buf, "%.1fk", per_s / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.1f", per_s);
  return buf;
}

// "step 250/1000 | loss 2.4132 | 11.9k tok/s | eta 48s"; the ETA extrapolates
// the mean step time since the start (which includes evaluations).
std::string Progress::status(int64_t k, double loss, double items_per_s, const std::string& timing) const {
  double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  int64_t done = k - opts_.first_step + 1;
  double eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(opts_.total_steps - k) : NAN;
  char buf[200];
  std::snprintf(buf, sizeof buf, "step %lld/%lld | loss %.4f | %s %s%s | eta %s", (long long)k,
                (long long)opts_.total_steps, loss, format_rate(items_per_s).c_str(), opts_.unit.c_str(),
                timing.c_str(), format_duration(eta).c_str());
  return buf;
}

void Progress::clear_bar() {
  if (!bar_shown_) return;
  os_ << "\r\033[K";
  bar_shown_ = false;
}

void Progress::step(int64_t k, double loss, double items_per_s, double comp_ms, double sync_ms) {
  char timing[64];
  std::snprintf(timing, sizeof timing, " | comp %.1f ms sync %.1f ms", comp_ms, sync_ms);
  step_with(k, status(k, loss, items_per_s, timing));
}

void Progress::step(int64_t k, double loss, double items_per_s) { step_with(k, status(k, loss, items_per_s, "")); }

void Progress::step_with(int64_t k, std::string line) {
  last_step_ = k;
  last_status_ = std::move(line);
  if (!opts_.terminal) {
    if (k % opts_.log_every == 0 || k == opts_.total_steps || k == opts_.first_step) os_ << last_status_ << "\n" << std::flush;
    return;
  }
  Clock::time_point now = Clock::now();
  if (k != opts_.total_steps && std::chrono::duration<double>(now - last_draw_).count() < opts_.redraw_s) return;
  last_draw_ = now;
  constexpr int kWidth = 24;
  int filled = static_cast<int>(kWidth * std::clamp<double>(static_cast<double>(k) / opts_.total_steps, 0, 1));
  last_bar_.assign(1, '[');
  last_bar_.append(filled, '#').append(kWidth - filled, '.').append("] ").append(last_status_);
  os_ << "\r\033[K" << last_bar_ << std::flush;
  bar_shown_ = true;
}

void Progress::eval(int64_t k, double val_loss, std::optional<double> val_accuracy) {
  char buf[128];
  if (val_accuracy)
    std::snprintf(buf, sizeof buf, "step %lld/%lld | val_loss %.4f | val_accuracy %.4f", (long long)k,
                  (long long)opts_.total_steps, val_loss, *val_accuracy);
  else
    std::snprintf(buf, sizeof buf, "step %lld/%lld | val_loss %.4f", (long long)k, (long long)opts_.total_steps,
                  val_loss);
  note(buf);
}

void Progress::note(const std::string& line) {
  bool redraw = bar_shown_;
  clear_bar();
  os_ << line << "\n";
  if (redraw) {
    os_ << last_bar_;  // the bar moves below the line
    bar_shown_ = true;
  }
  os_ << std::flush;
}

void Progress::finish() {
  if (bar_shown_) os_ << "\n" << std::flush;
  bar_shown_ = false;
}

}  // namespace artel::train
