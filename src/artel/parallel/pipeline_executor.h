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
// kind in schedule order, which both ends agree on.
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
// neighbour are null. In each two-rank group the peer is the other rank.
struct PipelineLinks {
  std::shared_ptr<comm::ProcessGroup> activations_from_prev, grads_to_prev;
  std::shared_ptr<comm::ProcessGroup> activations_to_next, grads_from_next;
};

struct StageFunctions {
  // Micro-batch `mb` through this stage. `inputs` are what the previous stage
  // sent (float ones are leaves that collect their gradients), empty on the
  // first stage. Returns what to send on, or on the last stage the
  // micro-batch's loss alone, already scaled so that the sum over
  // micro-batches is the step's loss.
  std::function<Activations(int mb, const Activations& inputs)> forward;
  // A guard under which a backward only accumulates locally (data parallelism:
  // every backward but a step's last); may be empty.
  std::function<std::shared_ptr<void>()> no_sync;
};

struct PipelineRunStats {
  int peak_live_micro_batches = 0;  // forwards whose backward had not run yet, at most at once
};

class PipelineExecutor {
 public:
  PipelineExecutor(int stage, int stages, PipelineLinks links);

  // Runs the list; OptimizerStep is left to the caller (it comes last). Waits
  // for every send before returning. Throws on an instruction that does not
  // fit this stage (a send past the last stage, a backward without forward).
  PipelineRunStats run(const Schedule& schedule, const StageFunctions& fns);

  int stage() const { return stage_; }
  int stages() const { return stages_; }

 private:
  struct InFlight {
    Activations inputs, outputs;
  };
  comm::ProcessGroup& link(const std::shared_ptr<comm::ProcessGroup>& g, const char* what) const;

  int stage_, stages_;
  PipelineLinks links_;
};

}  // namespace artel::parallel
