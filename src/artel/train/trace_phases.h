// Trace phases: where a traced run's step time went, worker by worker.
//
// For each worker and each of its tracks (compute; every group's
// communication), the median per step of every event name's time in it: the
// phases the trainer marks (load, forward, backward, sync, optimizer), the
// collectives each group ran, a stage's sends and receives. Two runs traced
// side by side (1 worker and 2, say) then show which phase grew. A step's
// events of one name are summed first (micro-batches, buckets), and `count`
// says how many ran a step; point-to-point names lose their tag ("send to
// rank 1 tag 7" counts as "send to rank 1"). Steps before `first_step` (a
// warm-up: first allocations, the DDP's bucket order) are left out.
//
//   out << phases_table(trace_phases(all_ranks, first_counted_step(all_ranks)));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "artel/train/trace_export.h"

namespace artel::train {

struct PhaseTime {
  std::string name;
  double median_ms = 0;  // median over the steps it ran in of its time in a step
  double count = 0;      // events a step, over the steps in range
};

struct TrackPhases {
  std::string track;  // "compute", "comm world", ...
  std::vector<PhaseTime> phases;  // in order of first appearance
};

struct PhaseTimes {
  int rank = 0;
  std::vector<TrackPhases> tracks;  // in order of first appearance
  int64_t first_step = 0, last_step = -1;  // the steps counted: none when last < first
};

// Steps from `first_step` on; events with no step (-1) are left out.
std::vector<PhaseTimes> trace_phases(const std::vector<RankTrace>& ranks, int64_t first_step);

// The first step a run's phase medians count: of the steps its events name,
// warmup_steps of them are left out (train_bench.h: as `artel bench train`
// leaves out of its step medians). 0 when no event names a step.
int64_t first_counted_step(const std::vector<RankTrace>& ranks);

// Lines of text, one per worker and track:
//   step phases, median ms a step over steps 21-300 (count a step where not 1):
//     rank 0 compute: load 0.087, forward 2.082, backward 2.463, sync 0.304, optimizer 0.427
//     rank 0 comm world: all_reduce 0.031, reduce_scatter 0.239 x2, all_gather 0.194 x2
std::string phases_table(const std::vector<PhaseTimes>& phases);

}  // namespace artel::train
