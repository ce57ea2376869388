#include "artel/plan/pipeline_timeline.h"


namespace artel::plan {

std::vector<parallel::Schedule> layout_schedules(const Layout& layout) {
  const int m = static_cast<int>(layout.micro_batches), p = static_cast<int>(layout.pp);
  switch (layout.schedule) {
    case Schedule::gpipe: return parallel::all_stages(parallel::ScheduleKind::gpipe, m, p);
    case Schedule::one_f_one_b: return parallel::all_stages(parallel::ScheduleKind::one_f_one_b, m, p);
    case Schedule::interleaved: return parallel::all_stages(parallel::ScheduleKind::interleaved, m, p, static_cast<int>(layout.chunks));
  }
  return {};
}

parallel::SimulationResult simulate_layout(const Layout& layout, const parallel::CostModel& cost) {
  return parallel::simulate(layout_schedules(layout), cost, parallel::Timelines::left_out);
}

}  // namespace artel::plan
