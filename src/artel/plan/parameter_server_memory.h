// The memory of a parameter-server job's two kinds of process, as the
// memory report counts them (train/memory_report.h): a worker and the
// server that holds the most (parallel/ps_server.h, ps_client.h).
//
// Note [A parameter server's memory]
// A worker trains a whole replica: the model's weights and gradients and
// its activations, as one data-parallel worker at --zero 0, but no
// optimizer state (the servers step), and its client keeps a flat copy of
// the weights as the servers hold them (ps_client.h: one buffer a server,
// the pulls' landing and the pushes' packing), w·P more. A server holding
// n elements keeps their weights and the gradient its optimizer reads
// (w·n, g·n), that optimizer's state (o·n), and two buffers of n per
// worker (2·W·g·n): its pending push (under BSP each worker's push of a
// clock waits apart until every worker's is in; kept under SSP and ASP
// too) and the snapshot a pull copies under the lock, so that pushes apply
// while it is sent. The largest server's n comes from the job's shard plan
// (parallel/ps_shard_plan.h), which the caller knows from the model's
// tensors. Measured against VmHWM (GPT of 50.5 M parameters, 2 workers, 2
// servers, AdamW; Intel, 2026-12-02): a worker 813.8 MiB predicted, 865.5
// held; a server 770.9 predicted, 797.3 held; the rest is the program (the
// cluster's runtime, 0 in `artel train`'s check).
//
//   ParameterServerMemory m = predict_ps_memory(model, cluster, workload, Recompute::none, /*workers=*/4, n);
//   if (!m.worker.fits() || !m.server.fits()) ...;   // artel train's check
#pragma once

#include <cstdint>

#include "artel/plan/cluster.h"
#include "artel/plan/layout.h"
#include "artel/plan/memory_model.h"
#include "artel/plan/model_description.h"

namespace artel::plan {

struct ParameterServerMemory {
  MemoryPrediction worker;
  MemoryPrediction server;  // the server of the largest shard
};

// workload.global_batch is one worker's batch (the workers do not reduce
// with each other), recompute its recomputation; largest_shard is the most
// elements one server keeps.
ParameterServerMemory predict_ps_memory(const ModelDescription& model, const Cluster& cluster,
                                        const Workload& workload, Recompute recompute, int64_t workers,
                                        int64_t largest_shard);

}  // namespace artel::plan
