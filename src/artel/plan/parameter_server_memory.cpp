#include "artel/plan/parameter_server_memory.h"

#include "artel/core/error.h"
#include "artel/plan/pipeline_timeline.h"
#include "artel/plan/stage_work.h"

namespace artel::plan {

ParameterServerMemory predict_ps_memory(const ModelDescription& model, const Cluster& cluster,
                                        const Workload& workload, Recompute recompute, int64_t workers,
                                        int64_t largest_shard) {
  ARTEL_CHECK(workers >= 1, "a parameter-server job needs a worker, not ", workers);
  ARTEL_CHECK(largest_shard >= 0, "a server's shard cannot hold ", largest_shard, " elements");
  // A worker's replica is a one-worker layout: nothing reduces between workers.
  Layout one;
  one.recompute = recompute;
  validate_layout(model, one, workload, 1);
  const std::vector<StageWork> stages = stage_work(model, cluster, one, workload);
  const parallel::SimulationResult sim = simulate_layout(one, parallel::CostModel{});
  ParameterServerMemory m;
  m.worker = memory_of(stages, sim.peak_live_activations, cluster, one, workload);
  m.worker.optimizer_state = 0;
  m.worker.communication += workload.state.weight * stages.front().parameters;
  // Never alone on its host: its servers run beside it (cluster.h's runtime with peers).
  const double with_peers = cluster.device.runtime_bytes_with_peers.value;
  m.worker.runtime = with_peers > 0 ? with_peers : cluster.device.runtime_bytes.value;

  const double n = static_cast<double>(largest_shard);
  m.server.capacity = m.worker.capacity;
  m.server.runtime = m.worker.runtime;
  m.server.parameters = workload.state.weight * n;
  m.server.gradients = workload.state.gradient * n;
  m.server.optimizer_state = workload.state.optimizer * n;
  m.server.communication = 2.0 * static_cast<double>(workers) * workload.state.gradient * n;
  return m;
}

}  // namespace artel::plan
