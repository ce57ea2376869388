// Megatron-LM's interleaved 1F1B schedule (Narayanan et al. 2021, §2.2.2)
// as instruction lists: the executor runs them (--schedule interleaved
// --chunks V) and the planner plays them with the same simulator as GPipe
// and 1F1B.
//
// Each of the P stages holds V model chunks; chunk c of stage s is virtual
// stage c·P + s of a pipeline P·V long, so a micro-batch goes round the
// stages V times (stage P−1 sends chunk c's output to stage 0's chunk c+1).
// Micro-batches run in groups of P: forward unit k is chunk (k / P) mod V of
// micro-batch (k / (P·V))·P + k mod P; backward units go through the chunks
// in reverse. Stage s first runs min(M·V, 2·(P − s − 1) + (V − 1)·P)
// warm-up forwards, then alternates one forward and one backward, then
// drains. The bubble shrinks V-fold: (P − 1) / (V·M) of the ideal time.
//
// Note [Interleaved instruction numbers]
// In the instructions a micro-batch number is chunk·M + micro-batch (unique
// per stage, as the simulator's live set and the executor's need), and a
// message is numbered by the sender's chunk for activations and by the
// receiver's for gradients. Only stage 0 sees the two differ: the
// activation its chunk c+1 consumes and the gradient that chunk sends back
// are both numbered c·M + micro-batch (interleaved_unit decodes them).
//
//   auto schedules = interleaved_all_stages(/*micro_batches=*/8, /*stages=*/4, /*chunks=*/2);
//   auto sim = simulate(schedules, CostModel{.forward = 0.5, .backward = 1.0});
#pragma once

#include <vector>

#include "artel/parallel/pipeline_schedule.h"

namespace artel::parallel {

// Needs stages >= 2, chunks >= 1 and micro_batches a positive multiple of stages.
Schedule interleaved_one_f_one_b(int micro_batches, int stages, int chunks, int stage);
std::vector<Schedule> interleaved_all_stages(int micro_batches, int stages, int chunks);

// Evaluation over the chunks: the training schedule's forwards alone, in
// groups of P micro-batches (any micro-batch count; no backward, no
// optimizer step).
Schedule interleaved_forward_only(int micro_batches, int stages, int chunks, int stage);

}  // namespace artel::parallel
