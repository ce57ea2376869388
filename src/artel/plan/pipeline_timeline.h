// The pipeline part of the planner: a layout's schedule (GPipe, 1F1B, or
// Megatron's interleaved 1F1B) played by parallel::simulate — the same
// simulator behind artel's schedules and a run's bubble report, so there is
// one cost model of a pipeline, not two.
//
//   auto sim = simulate_layout(layout, parallel::CostModel{.forward = f, .backward = b, .transfer = x});
//   sim.total_time; sim.peak_live_activations[stage];
#pragma once

#include <vector>

#include "artel/parallel/pipeline_schedule.h"
#include "artel/plan/layout.h"

namespace artel::plan {

// Every stage's instruction list for the layout's schedule, micro-batches and pp.
std::vector<parallel::Schedule> layout_schedules(const Layout& layout);
// cost.forward and cost.backward are one instruction's: a chunk's under the
// interleaved schedule, a whole stage's otherwise. Totals only: no timelines.
parallel::SimulationResult simulate_layout(const Layout& layout, const parallel::CostModel& cost);

}  // namespace artel::plan
