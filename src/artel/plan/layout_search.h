// Every valid layout of a model on a cluster, predicted and ranked by step
// time; those that do not fit in a worker's memory stay in the ranking,
// marked (Prediction::memory.fits()).
//
// Enumerated: dp·tp·pp = workers with tp dividing the heads and pp the
// layers; micro-batches dividing the per-replica batch; the schedules
// (gpipe and 1f1b, and interleaved with every chunk count that divides the
// layers of a stage, when micro-batches are a multiple of pp); ZeRO 0-3
// (3 only without tp and pp); recomputation none | selective | full;
// sequence parallelism (with tp > 1); and the compressions asked for
// (with dp > 1). Whatever validate_layout() refuses is left out, so the
// search and a single prediction share one definition of valid.
//
//   SearchSpace space;
//   std::vector<Prediction> ranked = search_layouts(model, cluster, workload, space);
#pragma once

#include <vector>

#include "artel/plan/step_model.h"

namespace artel::plan {

struct SearchSpace {
  std::vector<Schedule> schedules{Schedule::gpipe, Schedule::one_f_one_b, Schedule::interleaved};
  std::vector<int> zero_stages{0, 1, 2, 3};
  std::vector<Recompute> recompute{Recompute::none, Recompute::selective, Recompute::full};
  std::vector<bool> sequence_parallel{false, true};
  std::vector<Compression> compressions{Compression{}};
  int64_t max_micro_batches = 256;  // bounds the simulation's work
};

std::vector<Layout> enumerate_layouts(const ModelDescription& model, int64_t workers, const Workload& workload,
                                      const SearchSpace& space);
// Sorted by predicted step time, fastest first.
std::vector<Prediction> search_layouts(const ModelDescription& model, const Cluster& cluster, const Workload& workload,
                                       const SearchSpace& space);

}  // namespace artel::plan
