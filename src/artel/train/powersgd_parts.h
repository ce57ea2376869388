// PowerSGD's state as parts of a sharded checkpoint, for every strategy that
// runs DistributedDataParallel with --grad-compression powersgd.
//
// Note [PowerSGD in checkpoints]: a compressed run resumes exactly only with
// PowerSGD's state: Q (alike on every replica, so replica 0 writes it), each
// replica's error feedback and the step count. One DDP instance runs at each
// "position" of a layout: the whole model under data parallelism, one
// (pipeline stage, tensor-parallel rank) of a mesh, whose parameters are that
// shard's. Error feedback belongs to a replica of a position, so the keys name
// the layout and the position (powersgd_position): a resume under another
// layout, or a mesh whose stages hold other layers, finds none of a
// position's keys and starts PowerSGD afresh there, as a new run would. Each
// position's parts are found all together or not at all, so its Q, error
// feedback and step count always come from one run.
//
//   Tensor steps = Tensor::empty({}, DType::i64);
//   add_powersgd_parts(parts, &ddp, "powersgd/dp2.", rank, steps, /*reading=*/false);   // writing
//   add_powersgd_parts(wanted, &ddp, "powersgd/dp2.", rank, steps, /*reading=*/true);   // then, once read:
//   restore_powersgd_steps(ddp, steps);
#pragma once

#include <string>
#include <vector>

#include "artel/core/tensor.h"
#include "artel/parallel/distributed_data_parallel.h"
#include "artel/train/held_part.h"

namespace artel::train {

// The keys' prefix for data parallelism alone over `replicas` workers:
// "powersgd/dp2.".
std::string powersgd_position(int replicas);
// For a mesh: the layout (dp × pp × tp) and this worker's place in it, its
// stage's layers included: "powersgd/dp2.pp2.tp2.stage1[2,4).tp0.".
std::string powersgd_position(int dp, int pp, int tp, int stage, const std::string& stage_layers, int tp_rank);

// Adds to `parts` those that hold `ddp`'s PowerSGD state (none without
// PowerSGD, or without ddp: null), their data aliasing that live state: what
// replica `replica` of the position writes, or (`reading`) what it reads
// back. The step count goes through `steps` (i64, shape {}): set from ddp
// when writing, to -1 (none found) when reading.
void add_powersgd_parts(std::vector<HeldPart>& parts, const parallel::DistributedDataParallel* ddp,
                        const std::string& position, int replica, Tensor& steps, bool reading);
// After a checkpoint's parts were read: the step count read back into `ddp`,
// if one was found.
void restore_powersgd_steps(parallel::DistributedDataParallel& ddp, const Tensor& steps);
// Whether that read found ddp's PowerSGD state (true without PowerSGD).
bool powersgd_restored(const parallel::DistributedDataParallel& ddp, const Tensor& steps);

}  // namespace artel::train
