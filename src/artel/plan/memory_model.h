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
//               peers' registered buffers it touches (peer_pages below)
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
// registered bytes. The group registers them while it has room
// (comm::GroupOptions::registered_bytes, 64 MiB a rank); beyond that they are
// plain memory and the collectives stage through scratch. Measured on W2
// (0.8 M parameters, AMD Zen 3), RssShmem beyond the buckets: pipeline 1.1
// MiB, ZeRO-0 1.7-3.2, ZeRO-1 3.4-5.0 (its weights registered too); the
// 50 M GPT's buffers pass the 64 MiB and its workers hold 32 MiB more.
// Registered: the gradient buckets (ZeRO 0), and the weights (ZeRO 1-2:
// ZeRO-2's staging counted whole, which is exact for a model of one bucket
// and reaches the cap beyond), ZeRO-3's gradient staging.
double peer_pages(int64_t dp, double registered_bytes);

// Validates the layout, then predicts. The library entry point for refusing
// a layout before a run starts.
MemoryPrediction predict_memory(const ModelDescription& model, const Cluster& cluster, const Layout& layout,
                                const Workload& workload);

// From work already computed: each stage's work and the live micro-batches
// (chunks, under the interleaved schedule) the simulated schedule keeps.
MemoryPrediction memory_of(const std::vector<StageWork>& stages, const std::vector<int>& peak_live,
                           const Cluster& cluster, const Layout& layout, const Workload& workload);

}  // namespace artel::plan
