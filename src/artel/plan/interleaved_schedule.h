// Megatron-LM's interleaved 1F1B schedule (Narayanan et al. 2021, §2.2.2)
// as instruction lists for parallel::simulate, so the planner plays it with
// the same simulator as GPipe and 1F1B.
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
// In the instructions a micro-batch index is chunk·M + micro-batch (unique
// per stage, as the simulator's live set needs), and a message is named by
// the sender's chunk for activations and the receiver's for gradients.
//
//   auto schedules = interleaved_all_stages(/*micro_batches=*/8, /*stages=*/4, /*chunks=*/2);
//   auto sim = parallel::simulate(schedules, parallel::CostModel{.forward = 0.5, .backward = 1.0});
#pragma once

#include <vector>

#include "artel/parallel/pipeline_schedule.h"

namespace artel::plan {

// Needs stages >= 2, chunks >= 1 and micro_batches a positive multiple of stages.
parallel::Schedule interleaved_one_f_one_b(int micro_batches, int stages, int chunks, int stage);
std::vector<parallel::Schedule> interleaved_all_stages(int micro_batches, int stages, int chunks);

}  // namespace artel::plan
