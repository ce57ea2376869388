#include "artel/plan/step_model.h"

#include <algorithm>
#include <numeric>

#include "artel/core/error.h"
#include "artel/parallel/powersgd.h"
#include "artel/plan/collective_cost.h"
#include "artel/plan/pipeline_timeline.h"
#include "artel/plan/stage_work.h"

namespace artel::plan {

nlohmann::ordered_json StepTime::to_json() const {
  nlohmann::ordered_json j;
  j["step_s"] = step;
  j["compute_s"] = compute;
  j["recompute_s"] = recompute;
  j["tensor_parallel_s"] = tensor_parallel;
  j["zero_gathers_s"] = zero_gathers;
  j["bubble_s"] = bubble;
  j["pipeline_sends_s"] = pipeline_sends;
  j["data_parallel_s"] = data_parallel;
  j["optimizer_s"] = optimizer;
  j["critical_stage"] = critical_stage;
  j["flops_per_worker"] = flops_per_worker;
  return j;
}

namespace {

double micro_batch_work(const StageWork& s) {
  return s.forward_compute + s.backward_compute + s.forward_tensor_parallel + s.backward_tensor_parallel;
}

// ZeRO-3, one micro-batch: each unit's weights all-gathered in forward and
// again in backward, its gradients reduce-scattered in backward, each
// overlapped with the compute of the pass; the first gather of a pass waits.
//
// Note [ZeRO-3 over each worker's own network share]. ZeRO-3's collectives
// are costed as one flat ring over the data-parallel group in which each
// worker's traffic crosses only its own share of its host's network
// (Route::own_network_share: beta_inter, the host's rate / its workers),
// not as k rings side by side through all of a host's shares (how the
// gradient all-reduce of data parallelism is costed). Why: DeepSpeed's
// ZeRO-3 as Narayanan et al. 2021 measured it (Table 2) keeps its step
// time near constant as the GPUs double at a fixed batch — 175B: 81 s on
// 384 GPUs, 67 s on 768 and on 1536 — while its compute halves, so its
// per-worker traffic (weights gathered twice, gradients reduce-scattered:
// ~3 × parameters × 2 bytes a step, whatever the GPU count) ran at about
// one worker's network share (~16 GB/s of Selene's 25), not at the 200 GB/s
// a DGX node's eight adapters give a hierarchical collective. artel's own
// ZeRO-3 (parallel/fully_sharded.h) runs hierarchical all-gathers and
// reduce-scatters across hosts (docs/COLLECTIVES.md), costed as such for a
// workload of artel's collectives (CrossHost::hierarchical).
struct ZeroGathers {
  double forward = 0, backward = 0;
};

// What a time-sliced worker pays on its core for collectives whose copies
// touch `copy_bytes` and of which `exposed` seconds are waited for (Note [A
// collective's copies], collective_cost.h): the copies run in that wait
// first, and what does not fit takes the core from compute.
double copies_on_core(const Cluster& c, double copy_bytes, double exposed) {
  if (!time_sliced(c)) return 0;
  return std::max(0.0, streaming_seconds(c.device, copy_bytes) - exposed);
}

ZeroGathers zero3_exposed(const StageWork& st, const Cluster& c, const Layout& l, const Workload& w) {
  if (l.zero < 3 || l.dp <= 1) return {};
  const GroupPlacement g = place_group(
      c, l.dp, l.tp * l.pp,
      w.cross_host == CrossHost::hierarchical ? Route::hierarchical : Route::own_network_share);
  double gather = 0, scatter = 0, first = 0;  // seconds on the links
  double gather_copies = 0, scatter_copies = 0;  // bytes the copies touch
  const std::vector<double> units = unit_parameters(st);
  for (size_t i = 0; i < units.size(); ++i) {
    const double weights = units[i] * w.state.weight, gradients = units[i] * w.state.gradient;
    const double ag = all_gather_seconds(c, g, weights);
    if (i == 0) first = ag;
    gather += ag;
    scatter += reduce_scatter_seconds(c, g, gradients);
    // A unit's gathered weights are plain memory; its gradients are staged in
    // registered memory (parallel/fully_sharded.cpp), which a host's steps
    // read in place on one host.
    gather_copies += all_gather_copy_bytes(g, weights);
    scatter_copies += reduce_scatter_copy_bytes(g, gradients, /*registered=*/true);
  }
  const double forward = first + std::max(0.0, gather - first - st.forward_compute);
  const double backward = first + std::max(0.0, gather - first + scatter - st.backward_compute);
  return {forward + copies_on_core(c, gather_copies, forward),
          backward + copies_on_core(c, gather_copies + scatter_copies, backward)};
}

// Bytes of a worker's gradient synchronisation as its all-reduces send them:
// one buffer, or PowerSGD's two (parallel/powersgd.h) — the Ps with every
// gradient sent whole (vectors, and the matrices parallel::powersgd_compresses
// leaves whole), then the Qs — and the compression's own work: PowerSGD's
// three thin products and error feedback's streams on the compressed
// matrices, or a bf16 wire's two conversions of fp32 gradients (DDP's
// on_the_wire and complete: the bucket narrowed, read 4 bytes and written 2
// a parameter, then the average, this rank's block under ZeRO >= 1, widened
// back).
struct DpBuffers {
  double first = 0, second = 0;
  double compression_flops = 0, compression_bytes = 0;
};

DpBuffers dp_buffers(const StageWork& st, const Layout& l, const Workload& w) {
  const double wire =
      l.compression.kind == Compression::Kind::bf16 ? std::min(2.0, w.state.gradient) : w.state.gradient;
  if (l.compression.kind == Compression::Kind::none) return {st.parameters * wire, 0, 0};
  if (l.compression.kind == Compression::Kind::bf16) {  // nothing to convert when gradients are bf16 already
    const double widened = l.zero >= 1 ? st.parameters / static_cast<double>(l.dp) : st.parameters;
    const double converted = wire < w.state.gradient ? (w.state.gradient + wire) * (st.parameters + widened) : 0;
    return {st.parameters * wire, 0, 0, converted};
  }
  const double r = l.compression.rank;
  DpBuffers b;
  double compressed = 0;
  for (const Matrix& m : st.matrices) {
    if (!parallel::powersgd_compresses(static_cast<int64_t>(m.n), static_cast<int64_t>(m.m), l.compression.rank)) {
      continue;
    }
    compressed += m.n * m.m;
    b.first += m.n * r * wire;                                         // P = M·Q: (n, r)
    b.second += m.m * r * wire;                                        // Q = Mᵀ·P: (m, r)
    // P = M·Q, Q = Mᵀ·P and M = P·Qᵀ, P's orthonormalisation.
    b.compression_flops += 3 * (2 * m.n * m.m * r) + 2 * m.n * r * r;
    // fp32 passes over M (parallel/powersgd.cpp): add the error in (read 2,
    // write 1), read by both products, then one pass that reads M and writes
    // the new error and P·Qᵀ (read 1, write 2): 8 of them; at small r the
    // products stream M more than they compute.
    b.compression_bytes += 8 * 4 * m.n * m.m;
  }
  b.first += (st.parameters - compressed) * wire;
  return b;
}

// When the reduction of a stage's gradients ends, from the start of the last
// micro-batch's backward (`window` long): DDP's buckets
// (parallel/bucket_plan.h) over the stage's tensors walked backwards, each
// started once backward has produced the gradients of the units it holds
// (units ready in proportion to their backward time) and the bucket before
// it is done, in the order they become ready (as DDP starts them from its
// second step); `seconds` prices a bucket of that many parameters. The
// last bucket holds the first tensors (a GPT's embedding, ready only when
// backward ends), so its reduction is exposed however early the others
// run, unless the embedding is a tied table kept apart (UnitBucket::table):
// then it is ready with the head, first, and only its lookup's rows are
// left for the end (gathered after backward, data_parallel_exposed).
template <class Seconds>
double bucketed_finish(const StageWork& st, double window, std::vector<UnitBucket> buckets, Seconds seconds) {
  const double total = std::accumulate(st.unit_backward.begin(), st.unit_backward.end(), 0.0);
  std::vector<double> done(st.unit_backward.size());  // unit i's gradients ready: backward runs units last to first
  double after = 0;
  for (size_t i = done.size(); i-- > 0;) {
    after += st.unit_backward[i];
    done[i] = total > 0 ? window * after / total : window;
  }
  std::stable_sort(buckets.begin(), buckets.end(),
                   [&](const UnitBucket& x, const UnitBucket& y) { return done[x.completed_by] < done[y.completed_by]; });
  double finish = 0;
  for (const UnitBucket& b : buckets) finish = std::max(finish, done[b.completed_by]) + seconds(b.parameters);
  return finish;
}

double optimizer_seconds(const StageWork& st, const Cluster& c, const Layout& l, const Workload& w) {
  const double updated = st.parameters / (l.zero >= 1 ? static_cast<double>(l.dp) : 1.0);
  const double bytes = updated * (2 * (w.state.weight + w.state.optimizer) + w.state.gradient);
  return streaming_seconds(c.device, bytes);
}

double data_parallel_exposed(const StageWork& st, const Cluster& c, const Layout& l, const Workload& w) {
  if (l.dp <= 1 || l.zero > 2 || st.parameters <= 0) return 0;
  const GroupPlacement g = place_group(c, l.dp, l.tp * l.pp,
                                       w.cross_host == CrossHost::hierarchical ? Route::hierarchical
                                                                               : Route::all_network_shares);
  const DpBuffers b = dp_buffers(st, l, w);
  const bool powersgd = l.compression.kind == Compression::Kind::powersgd;
  // The reduction of `params` parameters' gradients over `links`, at the
  // stage's bytes a parameter on the wire (PowerSGD: its two all-reduces).
  const double first = b.first / st.parameters, second = b.second / st.parameters;
  auto reduce_seconds = [&](const Cluster& links, double params) {
    if (powersgd) return all_reduce_seconds(links, g, params * first) + all_reduce_seconds(links, g, params * second);
    return l.zero == 0 ? all_reduce_seconds(links, g, params * first) : reduce_scatter_seconds(links, g, params * first);
  };
  double after_step = 0;
  // ZeRO 1/2 (with PowerSGD too): the updated shards' weights are
  // all-gathered whole, each bucket's as the update finishes it (Note
  // [Gathers while the optimizer steps], distributed_data_parallel.cpp).
  // With a core to spare for the progress thread they run beside the
  // update and only what outlasts it is exposed; without one, after it.
  if (l.zero >= 1) {
    const double gathers = all_gather_seconds(c, g, st.parameters * w.state.weight);
    after_step += spare_core(c, w.threads) ? std::max(0.0, gathers - optimizer_seconds(st, c, l, w)) : gathers;
  }
  // Compressing runs on the cores (or the stream) backward computes on: never hidden.
  after_step += b.compression_flops / achieved_flops(c.device, Precision::fp32) +
                streaming_seconds(c.device, b.compression_bytes);
  if (!w.overlap_grad_reduce) return reduce_seconds(c, st.parameters) + after_step;

  const double window = st.backward_compute + st.backward_tensor_parallel;
  const std::vector<UnitBucket> buckets = unit_buckets(st, w.buckets, keeps_tables_apart(l, w));
  const bool apart = std::any_of(buckets.begin(), buckets.end(), [](const UnitBucket& b) { return b.table; });
  auto finish_on = [&](const Cluster& links) {
    const double finish = bucketed_finish(st, window, buckets, [&](double params) { return reduce_seconds(links, params); });
    if (!apart) return finish;
    return std::max(finish, window) + all_gather_seconds(links, g, static_cast<double>(l.dp) * st.table_rows_bytes);
  };
  double finish = finish_on(c);
  // A host's workers of different pipeline stages end backward a
  // micro-batch apart (`window`), so their pairs' reductions cross its
  // link staggered, not side by side as a worker's share assumes: two
  // flows of a link started Δ apart end, the later one, at the later of
  // its time alone and its shared time less Δ (processor sharing).
  const double stages_on_host =
      std::clamp(static_cast<double>(c.per_host()) / static_cast<double>(l.tp), 1.0, static_cast<double>(l.pp));
  if (g.crosses_hosts() && stages_on_host > 1) {
    Cluster alone = c;
    alone.inter_host.beta.value *= stages_on_host;
    finish = std::max(finish_on(alone), finish - (stages_on_host - 1) * window);
  }
  // DDP's buckets are registered memory (parallel/distributed_data_parallel.cpp).
  double copies = 0;
  for (double bytes : {b.first, b.second}) {
    copies += powersgd || l.zero == 0 ? all_reduce_copy_bytes(g, bytes, /*registered=*/true)
                                      : reduce_scatter_copy_bytes(g, bytes, /*registered=*/true);
  }
  const double exposed = std::max(0.0, finish - window);
  return exposed + copies_on_core(c, copies, exposed) + after_step;
}

// The tied embedding's two copies (first and last stage) summed after backward.
double tied_embedding_seconds(const std::vector<StageWork>& stages, const ModelDescription& model, const Cluster& c,
                              const Layout& l, const Workload& w) {
  if (!model.transformer || l.pp <= 1) return 0;
  const GroupPlacement pipeline = place_group(c, l.pp, l.tp);
  const GroupPlacement pair{2, pipeline.crosses_hosts() ? 1 : 2, pipeline.crosses_hosts() ? 2 : 1};
  const double rows = static_cast<double>(model.transformer->vocab) / static_cast<double>(l.tp);
  return all_reduce_seconds(c, pair, rows * static_cast<double>(model.transformer->n_embd) * w.state.gradient);
}

}  // namespace

Prediction predict(const ModelDescription& model, const Cluster& machines, const Layout& layout,
                   const Workload& workload) {
  validate_layout(model, layout, workload, machines.workers());
  // On CPU hosts the workers share the cores: every rate below is this worker's share.
  const Cluster cluster = with_worker_speed(machines, worker_speed(machines, workload.threads));
  const std::vector<StageWork> stages = stage_work(model, cluster, layout, workload);
  const auto critical_it = std::max_element(stages.begin(), stages.end(), [](const StageWork& a, const StageWork& b) {
    return micro_batch_work(a) < micro_batch_work(b);
  });
  const StageWork& st = *critical_it;
  const ZeroGathers zero = zero3_exposed(st, cluster, layout, workload);

  double boundary = 0;
  for (const StageWork& s : stages) boundary = std::max(boundary, s.boundary_bytes);
  const bool crosses = place_group(cluster, layout.pp, layout.tp).crosses_hosts();
  const double chunks = static_cast<double>(layout.chunks);
  parallel::CostModel cost;
  cost.forward = (st.forward_compute + st.forward_tensor_parallel + zero.forward) / chunks;
  cost.backward = (st.backward_compute + st.backward_tensor_parallel + zero.backward) / chunks;
  // Each stage at its own cost (a chunk of it per instruction when
  // interleaved): the critical one's neighbours fill and drain the pipeline
  // at theirs. GPT-2's first stage of 2 costs half the last, which holds the
  // head: a bubble at the last stage's cost made its step 1773 ms, not 1495
  // (measured 1418 on AMD Zen 5).
  for (const StageWork& s : stages) {
    const ZeroGathers z = zero3_exposed(s, cluster, layout, workload);
    cost.stage_forward.push_back((s.forward_compute + s.forward_tensor_parallel + z.forward) / chunks);
    cost.stage_backward.push_back((s.backward_compute + s.backward_tensor_parallel + z.backward) / chunks);
  }
  cost.transfer = layout.pp > 1 ? send_seconds(cluster, crosses, boundary) : 0;
  const parallel::SimulationResult with_sends = simulate_layout(layout, cost);
  parallel::CostModel no_sends = cost;
  no_sends.transfer = 0;
  const double without = cost.transfer > 0 ? simulate_layout(layout, no_sends).total_time : with_sends.total_time;

  const double m = static_cast<double>(layout.micro_batches);
  Prediction p;
  p.layout = layout;
  StepTime& t = p.time;
  t.critical_stage = critical_it - stages.begin();
  t.compute = m * (st.forward_compute + st.backward_compute);
  t.recompute = m * st.recompute_compute;
  t.tensor_parallel = m * (st.forward_tensor_parallel + st.backward_tensor_parallel);
  t.zero_gathers = m * (zero.forward + zero.backward);
  t.bubble = std::max(0.0, without - m * chunks * (cost.forward + cost.backward));
  t.pipeline_sends = with_sends.total_time - without;
  t.data_parallel = data_parallel_exposed(st, cluster, layout, workload) +
                    tied_embedding_seconds(stages, model, cluster, layout, workload);
  t.optimizer = optimizer_seconds(st, cluster, layout, workload);
  t.step = with_sends.total_time + t.data_parallel + t.optimizer;
  t.flops_per_worker = m * st.flops;
  p.memory = memory_of(stages, with_sends.peak_live_activations, cluster, layout, workload);
  return p;
}

}  // namespace artel::plan
