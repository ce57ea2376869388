// The memory one worker needs for a layout, by kind, as artel's memory
// report counts it (train/memory_report.h): parameters, gradients,
// optimizer state, activations, communication buffers — and, under ZeRO-3,
// the parameters gathered at once beyond the worker's shard.
//
// With P the parameters a worker's stage holds after the tp split, N = dp
// and the workload's bytes per parameter (w, g, o; artel's AdamW 4/4/8,
// mixed precision 2/2/12):
//   parameters  w·P           (ZeRO-3: w·P/N, plus two units gathered and a tied embedding's)
//   gradients   g·P           (ZeRO-2, -3: g·P/N)
//   optimizer   o·P           (ZeRO-1, -2, -3: o·P/N)
//   activations the stage's bytes per micro-batch × the most micro-batches
//               the schedule keeps alive there (parallel::simulate's
//               peak_live_activations: GPipe M, 1F1B min(P − s, M)), plus
//               one block's activation gradients in its backward and what
//               recomputation rebuilds there
//   communication  two gradient bucket copies in flight (dp > 1, ZeRO 0-2;
//               none for artel, whose buckets are the gradients), ZeRO-3's
//               whole gradients of the units being reduce-scattered, one
//               (b, s, h) message for tp, and the pipeline messages of the
//               micro-batches alive
//   runtime     the program itself (code, libraries, data): the cluster's
//               runtime_bytes, or runtime_bytes_with_peers for a worker with
//               others on its host, measured by `artel plan calibrate` (0 in
//               vendor-spec files, which count the model's memory alone);
//               plus, in a data-parallel group on one host, the pages of its
//               peers' registered buffers it touches (peer_pages below), or,
//               in one that crosses hosts with several members on a host,
//               its hierarchical collectives' scratch (hierarchical_scratch)
// The worker that needs most (its stage) is the one reported.
//
//   MemoryPrediction m = predict_memory(model, cluster, layout, workload);
//   if (!m.fits()) ...;   // what `artel train` checks before it starts
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "artel/plan/cluster.h"
#include "artel/plan/layout.h"
#include "artel/plan/model_description.h"
#include "artel/plan/stage_work.h"

namespace artel::plan {

struct MemoryPrediction {
  int64_t stage = 0;  // the pipeline stage of the worker reported
  double parameters = 0, gradients = 0, optimizer_state = 0, activations = 0, communication = 0;
  double runtime = 0;   // the program's own memory (Device::runtime_bytes)
  double gathered = 0;  // ZeRO-3: parameters gathered beyond the shard (included in `parameters`)
  double capacity = 0;  // the worker's memory
  double total() const { return parameters + gradients + optimizer_state + activations + communication + runtime; }
  bool fits() const { return total() <= capacity; }
  nlohmann::ordered_json to_json() const;  // bytes
};

// Note [Peers' registered pages]
// On one host artel's data-parallel collectives work in place on the peers'
// registered buffers (comm/all_reduce_two_shot.cpp, reduce_scatter_shared.cpp,
// all_gather_shared.cpp): rank r reduces block r reading (and, two-shot,
// writing) every peer's block r of the gradient buckets, and under ZeRO 1-2
// gathers every peer's block of its weights. Each page it touches enters its
// resident set (VmHWM), though the memory is its peer's: (dp − 1)/dp of the
// registered bytes. Once, at the start, every rank but 0 also reads the rest
// of rank 0's copy of the buffer DDP broadcasts the weights through (its
// buckets, or under ZeRO 1-2 its weights: parallel::DistributedDataParallel::
// broadcast_weights), so the worker that needs most, a rank other than 0,
// touches (dp − 1)/dp of the registered bytes and of the broadcast ones.
// The group registers them while it has room
// (comm::GroupOptions::registered_bytes, 8 GiB a rank); beyond that they are
// plain memory and the collectives stage through scratch. Measured on W2
// (0.8 M parameters, AMD Zen 3), RssShmem beyond the buckets: pipeline 1.1
// MiB, ZeRO-0 1.7-3.2, ZeRO-1 3.4-5.0 (its weights registered too); GPT-2
// (124 M) under ZeRO-1, 2 workers: rank 0 236 + 236 MiB of its peer's
// buckets and weights, rank 1 236 + 473 (2026-12-02; the planner counted
// 236 + 236 until then and predicted its VmHWM 11.7% low).
// Registered: the gradient buckets (ZeRO 0), and the weights (ZeRO 1-2:
// ZeRO-2's staging counted whole, which is exact for a model of one bucket
// and reaches the cap beyond), ZeRO-3's gradient staging. Broadcast: the
// buckets (ZeRO 0), the weights (ZeRO 1-2); ZeRO-3 broadcasts nothing.
double peer_pages(int64_t dp, double registered_bytes, double broadcast_bytes);

// Note [A hierarchical collective's scratch]
// A data-parallel group across hosts with k > 1 members on a host runs
// artel's hierarchical collectives (comm/all_reduce_hierarchical.cpp and its
// reduce-scatter and all-gather): MPI across the hosts, and inside the host
// the shared-memory algorithms on buffers that are not registered, which
// stage every chunk through the host segment's scratch. Each member writes
// its own two halves (comm::GroupOptions::staging_bytes each) and reads its
// k − 1 peers': k · min(2 · staging, S) pages of the segment in its resident
// set, for the group's largest collective of S bytes. ZeRO 1-3's
// reduce-scatter and all-gather also reorder their blocks by slice through a
// heap buffer of min(S, comm::kHierarchicalScratchBytes), which glibc keeps.
// S is the largest gradient bucket (ZeRO 0-2, parallel/bucket_plan.h over
// the stage's tensors) or unit (ZeRO-3). Measured on W2 (2 hosts × 2 ranks, 1
// Gbit/s, AMD Zen 3), VmHWM less the memory report's kinds, the most of any
// worker: dp 4 ZeRO-1 43.9 MiB, ZeRO-0 41.2, pp 2 37.9 (RssShmem 4.2, 4.2,
// 1.1: ZeRO-0 is the 4 MiB of scratch, ZeRO-1 the reordering's 2.7 more).
double hierarchical_scratch(int64_t per_host, int zero, double largest_collective_bytes);

// Validates the layout, then predicts. The library entry point for refusing
// a layout before a run starts.
MemoryPrediction predict_memory(const ModelDescription& model, const Cluster& cluster, const Layout& layout,
                                const Workload& workload);

// From work already computed: each stage's work and the live micro-batches
// (chunks, under the interleaved schedule) the simulated schedule keeps.
MemoryPrediction memory_of(const std::vector<StageWork>& stages, const std::vector<int>& peak_live,
                           const Cluster& cluster, const Layout& layout, const Workload& workload);

}  // namespace artel::plan
