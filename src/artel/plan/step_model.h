// The predicted time of one training step of a layout, split by kind:
//
//   step = compute + tensor-parallel + ZeRO-3 gathers   (on the critical stage, every micro-batch)
//        + bubble + pipeline sends                      (parallel::simulate of the schedule)
//        + data-parallel (exposed) + optimizer step
//
// The pipeline is simulated with each instruction's cost: a forward is the
// critical stage's forward compute, its tp collectives and its exposed
// ZeRO-3 gathers (divided over chunks when interleaved); a backward
// likewise; a send's transfer is alpha + bytes/beta of the link between
// neighbouring stages. The bubble is the simulated time without transfers
// less the stage's own work; the pipeline sends are what transfers add.
// The critical stage is the one with the most work a micro-batch (stages
// differ by the embedding and the output layer); simulating every stage at
// its cost sets the steady state, and overstates fill and drain by the
// difference alone.
//
// Data parallelism: gradients of the stage's parameters (in the wire type
// of the compression) — an all-reduce (ZeRO-0, PowerSGD's two factor
// all-reduces), a reduce-scatter and the updated weights' all-gather
// (ZeRO-1, -2); with overlap the reduction hides behind the last
// micro-batch's backward. ZeRO-3 gathers each unit's weights in forward and
// again in backward, and reduce-scatters its gradients, every micro-batch,
// overlapped with that micro-batch's compute; what does not fit is exposed.
// The optimizer step streams weights, gradients and state once
// (memory-bound).
//
//   Prediction p = predict(model, cluster, layout, workload);
//   p.time.step; p.time.bubble; p.memory.total();
#pragma once

#include <nlohmann/json.hpp>

#include "artel/plan/cluster.h"
#include "artel/plan/layout.h"
#include "artel/plan/memory_model.h"
#include "artel/plan/model_description.h"

namespace artel::plan {

struct StepTime {
  double step = 0;             // seconds
  double compute = 0;          // forward, backward and recomputation of the critical stage
  double recompute = 0;        // of which the recomputation
  double tensor_parallel = 0;  // tp collectives (not overlapped)
  double zero_gathers = 0;     // ZeRO-3: exposed weight gathers and gradient reduce-scatters
  double bubble = 0;           // the critical stage idle in the simulated schedule
  double pipeline_sends = 0;   // what the transfers between stages add to the schedule
  double data_parallel = 0;    // exposed gradient synchronisation (and compression's own work)
  double optimizer = 0;        // the optimizer step
  int64_t critical_stage = 0;
  double flops_per_worker = 0;  // matrix-product FLOPs the critical worker runs in the step
  nlohmann::ordered_json to_json() const;
};

struct Prediction {
  Layout layout;
  StepTime time;
  MemoryPrediction memory;
};

// Validates the layout (throws Error with the reason), then predicts.
Prediction predict(const ModelDescription& model, const Cluster& cluster, const Layout& layout,
                   const Workload& workload);

}  // namespace artel::plan
