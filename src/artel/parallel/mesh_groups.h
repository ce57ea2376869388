// MeshGroups: every process group one worker of a DP × PP × TP job needs,
// derived from the topology (topology.h) in one place:
//
//   tp         the ranks that split each matrix with this one (same dp, pp)
//   dp         the replicas of this shard (same pp, tp): gradient all-reduce
//   replica    the P·T workers of this one model replica (same dp): global
//              gradient norm, gathering the whole model
//   embedding  first and last stage (same dp, tp), which both hold the tied
//              token embedding: its gradient is summed over the two
//   links      the pipeline's neighbour groups (Note [Pipeline links])
//
// Groups of one rank are null (nothing to talk about). Collective over the
// world: every worker builds its MeshGroups at the same point.
//
//   MeshGroups g = make_mesh_groups(world, /*pp=*/2, /*tp=*/2);
//   g.coord;            // {dp, pp, tp} of this worker
//   g.tp->all_reduce(t);
#pragma once

#include <memory>

#include "artel/comm/process_group.h"
#include "artel/parallel/pipeline_executor.h"
#include "artel/parallel/topology.h"

namespace artel::parallel {

struct MeshGroups {
  Topology topology{1, 1, 1, 1};
  Coord coord;
  std::shared_ptr<comm::ProcessGroup> world, tp, dp, replica, embedding;
  PipelineLinks links;
};

// Throws Error (before creating anything) when pp · tp does not divide the world.
// `link_message_bytes` (0: the world's GroupOptions::message_bytes) sizes each
// pipeline link's buffer: when the activations a stage sends ahead fit, its
// sends complete at once on its own thread and never wait for the receiver.
// `ring`: the last stage is linked to the first as to a next stage (the
// interleaved schedule's, Note [Pipeline links]).
MeshGroups make_mesh_groups(std::shared_ptr<comm::ProcessGroup> world, int pp, int tp, size_t link_message_bytes = 0,
                            bool ring = false);

// The channel a pipeline link gets (its `link_message_bytes`): room for
// `hand_overs` hand-overs (a step's: M·chunks) of `hand_over_bytes` each,
// with their headers, so no send waits for its receiver; at most 64 MiB,
// past which sends stream through it (slower, still correct). A step's
// traffic goes round all of it, so both ends of a link touch it all (the
// planner counts it: Note [Pipeline link channels] in plan/memory_model.cpp).
size_t pipeline_link_bytes(double hand_over_bytes, int64_t hand_overs);

}  // namespace artel::parallel
