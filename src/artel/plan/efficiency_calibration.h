// Calibrating a cluster's GEMM efficiency on one measured step: the
// efficiency at which the planner itself predicts the step time that a run
// of a layout took. A software stack (its kernels, its launch overheads)
// reaches some fraction of a GPU's peak; one measured step whose time is
// mostly compute pins that fraction down, and the planner then predicts
// every other layout run by the same software on the same GPUs.
//
// This is calibration, not fitting: one point per software generation,
// solved by bisection on the planner's own prediction (the step time falls
// as the efficiency rises), and the point used is not among those the
// calibrated planner is then judged on (tests/plan/published_tables_test.cpp).
//
//   const double e = calibrate_gemm_efficiency(model, cluster, layout, workload, /*measured_step_s=*/2.9);
//   Cluster calibrated = with_gemm_efficiency(cluster, e, "calibrated on ...");
#pragma once

#include <string>

#include "artel/plan/cluster.h"
#include "artel/plan/layout.h"
#include "artel/plan/model_description.h"

namespace artel::plan {

// The GEMM efficiency in (0, 1] at which predict(model, cluster, layout,
// workload).time.step equals `measured_step_s` (the efficiency to 1e-6, relative).
// Throws Error when no efficiency reaches it — the measured step is faster
// than the planner allows at peak, or so slow that the time is not in the
// matrix products at all — or when the cluster has a calibrated GEMM table
// (then the efficiency is not used).
double calibrate_gemm_efficiency(const ModelDescription& model, const Cluster& cluster, const Layout& layout,
                                 const Workload& workload, double measured_step_s);

// The same cluster with another GEMM efficiency and where it comes from.
Cluster with_gemm_efficiency(const Cluster& cluster, double efficiency, const std::string& source);

}  // namespace artel::plan
