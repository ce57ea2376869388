// The clocks of a parameter server's workers and the consistency rule over
// them (bounded staleness, Ho et al., NIPS 2013), as a pure object the
// servers consult. A worker's clock counts the steps it has pushed. With
// staleness s:
//   - a worker at clock c may compute its next step while the slowest live
//     worker is at least at c - s (s = 0: BSP, every worker in lockstep;
//     no bound: ASP, never waits);
//   - its read must hold every update of clocks below c - s from every live
//     worker (SSP's guarantee: "every update up to clock c - s - 1"), and may
//     hold newer ones.
// A worker that died or stopped answering is dropped: it no longer holds the
// others back (ASP and SSP go on without it; BSP fails the job instead).
//
//   PsClock clock(4, /*staleness=*/3);
//   if (clock.may_start(w)) { ...pull, compute, push...; clock.advance(w); }
//   int64_t need = clock.required_view(w);  // the read waits for every update of clocks < need
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace artel::parallel {

class PsClock {
 public:
  // staleness: s >= 0, or nullopt for no bound (ASP). Throws on workers < 1 or s < 0.
  PsClock(int workers, std::optional<int64_t> staleness);

  int workers() const { return static_cast<int>(clocks_.size()); }
  std::optional<int64_t> staleness() const { return staleness_; }
  int64_t clock(int worker) const;
  // The slowest live worker's clock; the fastest's when every worker is dropped.
  int64_t min_clock() const;

  bool may_start(int worker) const;
  // Clocks below this must be complete (pushed by every live worker) in the
  // worker's read: c - s; 0 (nothing required) under ASP or early on.
  int64_t required_view(int worker) const;
  void advance(int worker);  // the worker pushed its step: clock + 1
  void start_at(int64_t clock);  // every worker's clock, before any push (a resumed run's first)
  void drop(int worker);     // no longer waited for; its clock stays as it was
  bool dropped(int worker) const;
  int live_workers() const;

 private:
  void check(int worker) const;
  std::vector<int64_t> clocks_;
  std::vector<bool> dropped_;
  std::optional<int64_t> staleness_;
};

// How stale the reads a worker made were: for a read at clock c whose view
// held every update of clocks below v, the clocks missing are c - v. Kept as
// counts per value, for metrics.jsonl and the end-of-run summary.
class StalenessHistogram {
 public:
  void record(int64_t missing_clocks, int64_t times = 1);  // >= 0, >= 0
  const std::map<int64_t, int64_t>& counts() const { return counts_; }
  int64_t reads() const;
  int64_t max() const;     // 0 when empty
  double mean() const;     // 0 when empty
  void merge(const StalenessHistogram& other);

 private:
  std::map<int64_t, int64_t> counts_;
};

}  // namespace artel::parallel
