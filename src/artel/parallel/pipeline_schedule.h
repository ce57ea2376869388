// Pipeline schedules as data (after DeepSpeed's runtime/pipe/schedule.py).
//
// A schedule is, for one stage, the ordered list of what that stage does in one
// global batch: run a micro-batch forward or backward, send or receive an
// activation or its gradient to/from a neighbouring stage, step the optimizer.
// Schedules are plain functions of (micro-batches M, stages P, stage), so they
// are tested without processes, and one executor runs any of them. `simulate`
// plays the lists of all stages against each other to give the timeline, the
// bubble and the peak live activations, and finds deadlocks.
//
//   auto mine = one_f_one_b(/*micro_batches=*/8, /*stages=*/4, /*stage=*/1);
//   for (const Instruction& ins : mine) std::visit(executor, ins);
//   auto sim = simulate(all_stages(ScheduleKind::one_f_one_b, 8, 4), CostModel{});
//   // sim.bubble_share[s], sim.peak_live_activations[s], sim.total_time
//
// Note [Send semantics]: sends are eager (an isend whose buffer the executor
// keeps until the send completes); a receive blocks until the neighbour has
// posted the send with the same kind and micro-batch (a tagged receive). The
// plain 1F1B order below relies on this: with blocking rendezvous sends, stage
// s would sit in SendActivation(i+1) while stage s+1 sits in SendGrad(i).
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace artel::parallel {

// Stage indices (to/from) are positions in the pipeline, 0 = first stage; the
// executor maps them to ranks through the topology (pp axis).
struct Forward {
  int micro_batch = 0;
  bool operator==(const Forward&) const = default;
};
struct Backward {
  int micro_batch = 0;
  bool operator==(const Backward&) const = default;
};
struct SendActivation {
  int micro_batch = 0;
  int to = 0;
  bool operator==(const SendActivation&) const = default;
};
struct RecvActivation {
  int micro_batch = 0;
  int from = 0;
  bool operator==(const RecvActivation&) const = default;
};
struct SendGrad {
  int micro_batch = 0;
  int to = 0;
  bool operator==(const SendGrad&) const = default;
};
struct RecvGrad {
  int micro_batch = 0;
  int from = 0;
  bool operator==(const RecvGrad&) const = default;
};
struct OptimizerStep {
  bool operator==(const OptimizerStep&) const = default;
};

using Instruction =
    std::variant<Forward, Backward, SendActivation, RecvActivation, SendGrad, RecvGrad, OptimizerStep>;
using Schedule = std::vector<Instruction>;

// "Forward(mb=0)", "SendActivation(mb=2, to=1)", "OptimizerStep".
std::string to_string(const Instruction& ins);
std::string to_string(const Schedule& schedule);  // one instruction per line

// All forwards (receive, compute, send on), then all backwards, micro-batches in
// order, then one optimizer step. Every stage holds all M activations at once.
Schedule gpipe(int micro_batches, int stages, int stage);

// PipeDream-Flush / Megatron 1F1B: min(P - stage - 1, M) warm-up forwards, then
// alternate one forward and one backward, then the remaining backwards, then one
// optimizer step. At most min(M, P - stage) micro-batches are alive on a stage.
Schedule one_f_one_b(int micro_batches, int stages, int stage);

// Evaluation: every micro-batch received, computed and passed on, with no
// backward and no optimizer step; through each of `chunks` model chunks a
// stage (interleaved_forward_only) when there are more than one.
Schedule forward_only(int micro_batches, int stages, int stage, int chunks = 1);

// interleaved: Megatron's interleaved 1F1B over `chunks` model chunks a
// stage (interleaved_schedule.h); the others take chunks = 1.
enum class ScheduleKind { gpipe, one_f_one_b, interleaved };
ScheduleKind parse_schedule_kind(std::string_view name);  // "gpipe" | "1f1b" | "interleaved"
std::string_view schedule_kind_name(ScheduleKind kind);
Schedule make_schedule(ScheduleKind kind, int micro_batches, int stages, int stage, int chunks = 1);
std::vector<Schedule> all_stages(ScheduleKind kind, int micro_batches, int stages, int chunks = 1);

// Time units per instruction; a receive costs only its wait.
struct CostModel {
  double forward = 1.0;
  double backward = 2.0;
  double send = 0.0;            // time the sending stage is busy posting it
  double transfer = 0.0;        // from the send to the data being available
  double optimizer_step = 0.0;
  // Stages of unequal cost (the one with the head is slower): stage s's
  // forward and backward; empty = every stage costs forward and backward.
  std::vector<double> stage_forward, stage_backward;
  double forward_of(int stage) const { return stage_forward.empty() ? forward : stage_forward[static_cast<size_t>(stage)]; }
  double backward_of(int stage) const { return stage_backward.empty() ? backward : stage_backward[static_cast<size_t>(stage)]; }
};

struct TimelineEntry {
  Instruction instruction;
  double start = 0.0;  // a receive: when the stage reached it
  double end = 0.0;    // a receive: when the data arrived
};

struct SimulationResult {
  std::vector<std::vector<TimelineEntry>> timelines;  // per stage, in execution order
  double total_time = 0.0;                            // the last stage to finish
  std::vector<double> busy_time;                      // per stage: forward, backward, send, step
  std::vector<double> bubble_share;                   // per stage: 1 - busy / total
  std::vector<int> peak_live_activations;             // per stage: forwards not yet backwarded
};

// Whether simulate() writes SimulationResult::timelines: the planner, which
// reads only the totals of thousands of layouts, leaves them out (half its
// time was writing them).
enum class Timelines { kept, left_out };

// Runs schedules[s] on stage s for every s. Throws Error on a deadlock (naming
// the cycle of waiting stages and their instructions), on a receive whose send
// never comes, on a send nobody receives, on a backward without its forward,
// on a forward never backwarded (unless the stage runs no backward at all:
// evaluation), on a negative micro-batch and on a neighbour index outside the
// pipeline.
SimulationResult simulate(const std::vector<Schedule>& schedules, const CostModel& cost,
                          Timelines timelines = Timelines::kept);

}  // namespace artel::parallel
