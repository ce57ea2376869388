#include "artel/plan/memory_model.h"

#include <algorithm>

#include "artel/comm/algorithms.h"
#include "artel/comm/process_group.h"
#include "artel/parallel/fully_sharded.h"
#include "artel/parallel/mesh_groups.h"
#include "artel/plan/collective_cost.h"
#include "artel/plan/pipeline_timeline.h"

namespace artel::plan {

nlohmann::ordered_json MemoryPrediction::to_json() const {
  nlohmann::ordered_json j;
  j["stage"] = stage;
  j["parameters"] = parameters;
  j["gradients"] = gradients;
  j["optimizer_state"] = optimizer_state;
  j["activations"] = activations;
  j["communication"] = communication;
  j["runtime"] = runtime;
  j["gathered"] = gathered;
  j["total"] = total();
  j["capacity"] = capacity;
  j["fits"] = fits();
  return j;
}

namespace {

// Parameters of the `count` largest units, and of a tied first unit besides
// (held through the whole step: used at both ends).
double tied_and_largest_units(const StageWork& st, size_t count) {
  std::vector<double> units = unit_parameters(st);
  double sum = 0;
  if (st.first_unit_tied_to_last && !units.empty()) {
    sum += units.front();
    units.erase(units.begin());
  }
  std::sort(units.rbegin(), units.rend());
  for (size_t i = 0; i < std::min(count, units.size()); ++i) sum += units[i];
  return sum;
}

// ZeRO-3's gradient staging (parallel/fully_sharded.cpp): a unit's whole
// gradients from the start of its backward until its reduce-scatter is done,
// which the launches of kReducesInFlight later units wait for: that many
// units and the one filling, and a tied first unit throughout.
double zero3_staging(const StageWork& st, const Workload& w) {
  return w.state.gradient *
         tied_and_largest_units(st, parallel::FullyShardedDataParallel::kReducesInFlight + 1);
}

// What the dp group's collectives read in the peers' memory (Note [Peers'
// registered pages]), before the cap.
double registered_buffers(const StageWork& st, const Layout& l, const Workload& w) {
  if (l.zero >= 3) return zero3_staging(st, w);
  return st.parameters * (w.state.gradient + (l.zero >= 1 ? w.state.weight : 0));
}

// The buffer rank 0's weights are broadcast through (Note [Peers' registered pages]).
double broadcast_buffer(const StageWork& st, const Layout& l, const Workload& w) {
  if (l.zero >= 3) return 0;
  return st.parameters * (l.zero >= 1 ? w.state.weight : w.state.gradient);
}

// The largest collective of the dp group (Note [A hierarchical collective's
// scratch]): a unit's gradients under ZeRO-3, else DDP's largest bucket.
double largest_collective(const StageWork& st, const Layout& l, const Workload& w) {
  double largest = 0;
  if (l.zero >= 3) {
    for (double p : unit_parameters(st)) largest = std::max(largest, p);
  } else {
    for (const UnitBucket& b : unit_buckets(st, w.buckets, keeps_tables_apart(l, w))) largest = std::max(largest, b.parameters);
  }
  return w.state.gradient * largest;
}

// Note [Tables apart]: a tied table's rows wait aside on each rank, and
// finish() gathers them all: its own, the copy it sends, every rank's
// received; past the table's rows, a dense copy of the table instead. At
// ZeRO 2 every micro-batch's rows wait; else the last one's.
double table_rows_buffers(const StageWork& st, const Layout& l, const Workload& w) {
  if (l.dp <= 1 || !keeps_tables_apart(l, w)) return 0;
  const double rows = st.table_rows_bytes * static_cast<double>(l.zero >= 2 ? l.micro_batches : 1);
  double bytes = 0;
  for (const UnitBucket& b : unit_buckets(st, w.buckets, true))
    if (b.table) bytes += std::min((2.0 + static_cast<double>(l.dp)) * rows, rows + w.state.gradient * b.parameters);
  return bytes;
}

// Note [Pipeline link channels]
// artel's pipeline links are two-rank groups, one a direction and kind
// (Note [Pipeline links]), each with a channel sized for a step's hand-overs
// (parallel::pipeline_link_bytes, the trainer's rule, of the largest stage
// boundary). A step's traffic goes round the whole channel, and both ends
// touch it, so a stage holds one channel a link: 2 at either end of a line, 4
// in its middle and everywhere on the interleaved schedule's ring; the
// worker's runtime, as the pages of its peers' buffers are. Measured
// (W2, pp 2, M 4, interleaved ×2, AMD Zen 3): the ring's two extra links
// were 4.2 MiB of VmHWM that the live messages' count (Megatron's, below)
// left out, -8.4%. Megatron-LM's runs: the messages of the live
// micro-batches, 2 a micro-batch.
double pipeline_messages(const StageWork& st, int64_t stage, int peak_live, double hand_over, const Layout& l,
                         const Workload& w) {
  if (w.activations != Activations::artel) return 2 * peak_live * st.boundary_bytes / static_cast<double>(l.chunks);
  if (l.pp <= 1) return 0;
  const bool ring = l.schedule == Schedule::interleaved;
  const int links = 2 * (static_cast<int>(ring || stage > 0) + static_cast<int>(ring || stage < l.pp - 1));
  return links * static_cast<double>(parallel::pipeline_link_bytes(hand_over, l.micro_batches * l.chunks));
}

MemoryPrediction stage_memory(const StageWork& st, int64_t stage, int peak_live, double hand_over,
                              const Cluster& cluster, const Layout& l, const Workload& w) {
  const double n = static_cast<double>(l.dp);
  MemoryPrediction m;
  m.capacity = cluster.device.memory_bytes.value;
  // A worker with others on its host holds more (cluster.h).
  const bool peers = std::min(l.dp * l.tp * l.pp, cluster.per_host()) > 1;
  const double with_peers = cluster.device.runtime_bytes_with_peers.value;
  m.runtime = peers && with_peers > 0 ? with_peers : cluster.device.runtime_bytes.value;
  const GroupPlacement dp = place_group(cluster, l.dp, l.tp * l.pp);
  if (peers && with_peers > 0 && l.dp > 1 && !dp.crosses_hosts())
    m.runtime += peer_pages(l.dp, registered_buffers(st, l, w), broadcast_buffer(st, l, w));
  if (w.cross_host == CrossHost::hierarchical && dp.crosses_hosts() && dp.per_host > 1)
    m.runtime += hierarchical_scratch(dp.per_host, l.zero, largest_collective(st, l, w));
  m.parameters = w.state.weight * st.parameters / (l.zero >= 3 ? n : 1.0);
  if (l.zero >= 3) {
    // Two units whole at once, the one computing and the one prefetched, and
    // a tied first unit (the root: gathered from the first forward to the
    // last backward).
    m.gathered = w.state.weight * tied_and_largest_units(st, 2);
    m.parameters += m.gathered;
  }
  m.gradients = w.state.gradient * st.parameters / (l.zero >= 2 ? n : 1.0);
  m.optimizer_state = w.state.optimizer * st.parameters / (l.zero >= 1 ? n : 1.0);
  const double per_instruction = st.activation_bytes / static_cast<double>(l.chunks);
  m.activations = peak_live * per_instruction + st.working_bytes;
  if (l.dp > 1 && l.zero <= 2) m.communication += 2 * w.bucket_copy_bytes;
  if (l.dp > 1 && l.zero >= 3) m.communication += zero3_staging(st, w);
  m.communication += table_rows_buffers(st, l, w);
  m.communication += st.tensor_parallel_message_bytes;
  // Megatron's in-flight messages are buffers of its own; artel's link
  // channels are the transport's shared memory, outside its tensors'
  // report, as its peers' pages are.
  (w.activations == Activations::artel ? m.runtime : m.communication) +=
      pipeline_messages(st, stage, peak_live, hand_over, l, w);
  return m;
}

}  // namespace

double peer_pages(int64_t dp, double registered_bytes, double broadcast_bytes) {
  const double registered = std::min(registered_bytes, static_cast<double>(comm::GroupOptions{}.registered_bytes));
  return static_cast<double>(dp - 1) / static_cast<double>(dp) * (registered + std::min(broadcast_bytes, registered));
}

double hierarchical_scratch(int64_t per_host, int zero, double largest_collective_bytes) {
  const double halves = 2.0 * static_cast<double>(comm::GroupOptions{}.staging_bytes);
  const double scratch = static_cast<double>(per_host) * std::min(halves, largest_collective_bytes);
  const double reorder =
      zero >= 1 ? std::min(largest_collective_bytes, static_cast<double>(comm::kHierarchicalScratchBytes)) : 0;
  return scratch + reorder;
}

MemoryPrediction memory_of(const std::vector<StageWork>& stages, const std::vector<int>& peak_live,
                           const Cluster& cluster, const Layout& layout, const Workload& workload) {
  MemoryPrediction worst;
  double hand_over = 0;  // every link is sized alike
  for (const StageWork& st : stages) hand_over = std::max(hand_over, st.boundary_bytes);
  for (size_t s = 0; s < stages.size(); ++s) {
    MemoryPrediction m =
        stage_memory(stages[s], static_cast<int64_t>(s), peak_live[s], hand_over, cluster, layout, workload);
    m.stage = static_cast<int64_t>(s);
    if (s == 0 || m.total() > worst.total()) worst = m;
  }
  return worst;
}

MemoryPrediction predict_memory(const ModelDescription& model, const Cluster& cluster, const Layout& layout,
                                const Workload& workload) {
  validate_layout(model, layout, workload, cluster.workers());
  const std::vector<StageWork> stages = stage_work(model, cluster, layout, workload);
  // Which micro-batches are alive depends on the order alone, so unit costs do.
  const parallel::SimulationResult sim = simulate_layout(layout, parallel::CostModel{});
  return memory_of(stages, sim.peak_live_activations, cluster, layout, workload);
}

}  // namespace artel::plan
