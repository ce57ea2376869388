// PowerSGD's state as parts of a sharded checkpoint, for every strategy that
// runs DistributedDataParallel with --grad-compression powersgd.
//
// Note [PowerSGD in checkpoints]: a compressed run resumes exactly only with
// PowerSGD's state: Q (alike on every replica, so replica 0 writes it), each
// replica's error feedback and the step count. One DDP instance runs at each
// "position" of a layout: the whole model under data parallelism, one
// (pipeline stage, tensor-parallel rank) of a mesh, whose parameters are that
// shard's. Error feedback belongs to a replica of a position, so the keys name
// the layout and the position (powersgd_position). A position's state comes
// back whole or not at all: it is read into fresh tensors and goes live only
// when every one of them was found, with Q's shape (its columns are
// --powersgd-rank) as this run's. Otherwise — a resume under another layout,
// a mesh whose stages hold other layers, another --powersgd-rank — PowerSGD
// starts afresh there, as a new run would, and the run says so.
//
//   add_powersgd_parts(parts, &ddp, "powersgd/dp2.", rank, /*reading=*/false);   // writing
//   add_powersgd_parts(wanted, &ddp, "powersgd/dp2.", rank, /*reading=*/true);   // reading; once read:
//   bool restored = restore_powersgd(&ddp, "powersgd/dp2.", rank, wanted, found);
#pragma once

#include <string>
#include <vector>

#include "artel/parallel/distributed_data_parallel.h"
#include "artel/train/held_part.h"

namespace artel::train {

// The keys' prefix for data parallelism alone over `replicas` workers:
// "powersgd/dp2.".
std::string powersgd_position(int replicas);
// For a mesh: the layout (dp × pp × tp) and this worker's place in it, its
// stage's layers included: "powersgd/dp2.pp2.tp2.stage1[2,4).tp0.".
std::string powersgd_position(int dp, int pp, int tp, int stage, const std::string& stage_layers, int tp_rank);

// Adds to `parts` those of `ddp`'s PowerSGD state (none without PowerSGD, or
// without ddp: null): what replica `replica` of the position writes, its data
// aliasing the live state, or (`reading`) what it reads back, into fresh
// tensors.
void add_powersgd_parts(std::vector<HeldPart>& parts, const parallel::DistributedDataParallel* ddp,
                        const std::string& position, int replica, bool reading);
// Once a checkpoint's `wanted` parts were read (found[i] for wanted[i]): the
// state replica `replica` of the position read into `ddp`, when every one of
// its parts was found. Whether it was (true without PowerSGD or ddp).
bool restore_powersgd(parallel::DistributedDataParallel* ddp, const std::string& position, int replica,
                      const std::vector<HeldPart>& wanted, const std::vector<bool>& found);

}  // namespace artel::train
