#include "artel/parallel/ps_clock.h"

#include <algorithm>

#include "artel/core/error.h"

namespace artel::parallel {

PsClock::PsClock(int workers, std::optional<int64_t> staleness)
    : clocks_(static_cast<size_t>(std::max(workers, 0)), 0), dropped_(clocks_.size(), false), staleness_(staleness) {
  ARTEL_CHECK(workers >= 1, "a parameter server needs at least one worker, got ", workers);
  ARTEL_CHECK(!staleness || *staleness >= 0, "staleness must be >= 0 (or unbounded), got ", staleness.value_or(0));
}

void PsClock::check(int worker) const {
  ARTEL_CHECK(worker >= 0 && worker < workers(), "worker ", worker, " is not in [0, ", workers(), ")");
}

int64_t PsClock::clock(int worker) const {
  check(worker);
  return clocks_[static_cast<size_t>(worker)];
}

int64_t PsClock::min_clock() const {
  int64_t slowest = -1;
  for (size_t w = 0; w < clocks_.size(); ++w)
    if (!dropped_[w] && (slowest < 0 || clocks_[w] < slowest)) slowest = clocks_[w];
  return slowest >= 0 ? slowest : *std::max_element(clocks_.begin(), clocks_.end());
}

bool PsClock::may_start(int worker) const {
  check(worker);
  return !staleness_ || clocks_[static_cast<size_t>(worker)] - min_clock() <= *staleness_;
}

int64_t PsClock::required_view(int worker) const {
  check(worker);
  if (!staleness_) return 0;
  return std::max<int64_t>(0, clocks_[static_cast<size_t>(worker)] - *staleness_);
}

void PsClock::start_at(int64_t clock) {
  ARTEL_CHECK(clock >= 0, "a clock starts at 0 or later, got ", clock);
  std::fill(clocks_.begin(), clocks_.end(), clock);
}

void PsClock::advance(int worker) {
  check(worker);
  ARTEL_CHECK(!dropped_[static_cast<size_t>(worker)], "worker ", worker, " was dropped and cannot push any more");
  ++clocks_[static_cast<size_t>(worker)];
}

void PsClock::drop(int worker) {
  check(worker);
  dropped_[static_cast<size_t>(worker)] = true;
}

bool PsClock::dropped(int worker) const {
  check(worker);
  return dropped_[static_cast<size_t>(worker)];
}

int PsClock::live_workers() const { return static_cast<int>(std::count(dropped_.begin(), dropped_.end(), false)); }

void StalenessHistogram::record(int64_t missing_clocks, int64_t times) {
  ARTEL_CHECK(missing_clocks >= 0, "a read cannot miss ", missing_clocks, " clocks");
  ARTEL_CHECK(times >= 0, "a read cannot be recorded ", times, " times");
  if (times > 0) counts_[missing_clocks] += times;
}

int64_t StalenessHistogram::reads() const {
  int64_t n = 0;
  for (const auto& [v, c] : counts_) n += c;
  return n;
}

int64_t StalenessHistogram::max() const { return counts_.empty() ? 0 : counts_.rbegin()->first; }

double StalenessHistogram::mean() const {
  const int64_t n = reads();
  if (n == 0) return 0;
  double sum = 0;
  for (const auto& [v, c] : counts_) sum += static_cast<double>(v) * static_cast<double>(c);
  return sum / static_cast<double>(n);
}

void StalenessHistogram::merge(const StalenessHistogram& other) {
  for (const auto& [v, c] : other.counts_) counts_[v] += c;
}

}  // namespace artel::parallel
