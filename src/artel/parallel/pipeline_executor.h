// PipelineExecutor: runs one stage's instruction list (pipeline_schedule.h) —
// any schedule, one interpreter (after DeepSpeed's schedule/engine split).
// Forward and backward are the stage's own (callbacks); the executor moves
// whatever tensors a stage returns downstream — any number, any shapes and
// dtypes, each message led by a small header that describes them — and the
// gradients of its float inputs upstream, keeps each in-flight micro-batch's
// inputs and outputs until its backward, and counts how many are alive at
// once.
//
// Note [Pipeline links]
// Each pair of neighbouring stages talks over two two-rank groups: one carries
// activations downstream, the other gradients upstream. A group runs its ops
// in order and a send may wait for its receiver, so with a single group per
// pair 1F1B would deadlock: stage s sending activation i+1 while stage s+1
// sends gradient i, each send queued in front of the receive the other one
// waits for. With one group per direction, each queue holds messages of one
// kind in schedule order, which both ends agree on. Under the interleaved
// schedule the pipeline is a ring: the last stage's activations go on to
// the first stage's next chunk, and that chunk's gradients come back, so
// those two stages are linked too (make_mesh_groups' `ring`).
//
//   PipelineExecutor ex(stage, stages, links);
//   ex.run(one_f_one_b(M, P, stage), {.forward = [&](int mb, const Activations& in) { ... }});
#pragma once

#include <functional>
#include <memory>

#include "artel/autograd/variable.h"
#include "artel/comm/process_group.h"
#include "artel/nn/parallel_plan.h"
#include "artel/parallel/pipeline_schedule.h"

namespace artel::parallel {

using autograd::Variable;
using nn::Activations;

// The four groups of a stage (Note [Pipeline links]); those toward a missing
// neighbour are null (in a ring there is none). In each two-rank group the
// peer is the other rank.
struct PipelineLinks {
  std::shared_ptr<comm::ProcessGroup> activations_from_prev, grads_to_prev;
  std::shared_ptr<comm::ProcessGroup> activations_to_next, grads_from_next;
};

struct StageFunctions {
  // Micro-batch `mb` through this stage's model chunk `chunk` (0 without
  // the interleaved schedule). `inputs` are what the previous (virtual)
  // stage sent (float ones are leaves that collect their gradients), empty
  // on the first. Returns what to send on, or on the last virtual stage the
  // micro-batch's loss alone, already scaled so that the sum over
  // micro-batches is the step's loss.
  std::function<Activations(int mb, int chunk, const Activations& inputs)> forward;
  // A guard under which a backward only accumulates locally (data parallelism:
  // every backward but a step's last, or each chunk's last under the
  // interleaved schedule: no two chunks of a stage share a parameter, which
  // ModelShard checks); may be empty.
  std::function<std::shared_ptr<void>()> no_sync;
};

struct PipelineRunStats {
  int peak_live_micro_batches = 0;  // forwards (of a micro-batch through a chunk) not yet backwarded, at most at once
};

class PipelineExecutor {
 public:
  // `chunks` > 1: the interleaved schedule's model chunks a stage, whose
  // links form a ring.
  PipelineExecutor(int stage, int stages, PipelineLinks links, int chunks = 1);

  // Runs the list; OptimizerStep is left to the caller (it comes last). Waits
  // for every send before returning. Throws on an instruction that does not
  // fit this stage (a send past the last stage, a backward without forward).
  PipelineRunStats run(const Schedule& schedule, const StageFunctions& fns);

  int stage() const { return stage_; }
  int stages() const { return stages_; }
  int chunks() const { return chunks_; }

 private:
  struct InFlight {
    Activations inputs, outputs;
  };
  comm::ProcessGroup& link(const std::shared_ptr<comm::ProcessGroup>& g, const char* what) const;

  int stage_, stages_, chunks_;
  PipelineLinks links_;
};

}  // namespace artel::parallel
