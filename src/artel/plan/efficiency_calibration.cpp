#include "artel/plan/efficiency_calibration.h"

#include "artel/core/error.h"
#include "artel/plan/step_model.h"

namespace artel::plan {

Cluster with_gemm_efficiency(const Cluster& cluster, double efficiency, const std::string& source) {
  ARTEL_CHECK(efficiency > 0 && efficiency <= 1, "a GEMM efficiency must be in (0, 1], got ", efficiency);
  Cluster c = cluster;
  c.device.gemm_efficiency = {efficiency, source};
  return c;
}

double calibrate_gemm_efficiency(const ModelDescription& model, const Cluster& cluster, const Layout& layout,
                                 const Workload& workload, double measured_step_s) {
  ARTEL_CHECK(measured_step_s > 0, "calibration: the measured step time must be > 0 s, got ", measured_step_s);
  ARTEL_CHECK(cluster.device.gemm_table.empty(),
              "calibration: the cluster has a GEMM table, which the planner uses instead of the efficiency");
  auto step_at = [&](double e) { return predict(model, with_gemm_efficiency(cluster, e, ""), layout, workload).time.step; };
  // The planner's step falls as the efficiency rises, so the efficiency
  // that predicts the measured step lies between these two bounds.
  double fast = 1.0, slow = 1e-3;
  if (step_at(fast) > measured_step_s) {
    throw Error("calibration: the measured step of " + std::to_string(measured_step_s) +
                    " s is faster than the planner predicts at the GPU's peak (" + std::to_string(step_at(fast)) +
                    " s) for " + describe(layout),
                "check the layout and the workload the measurement ran with");
  }
  if (step_at(slow) < measured_step_s) {
    throw Error("calibration: the measured step of " + std::to_string(measured_step_s) +
                    " s is slower than the planner predicts even at 0.1% of peak for " + describe(layout),
                "calibrate on a step whose time is mostly matrix products");
  }
  while (fast - slow > 1e-6 * fast) {
    const double mid = (fast + slow) / 2;
    (step_at(mid) > measured_step_s ? slow : fast) = mid;
  }
  return (fast + slow) / 2;
}

}  // namespace artel::plan
