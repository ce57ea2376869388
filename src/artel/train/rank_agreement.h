// Ranks started alike. Under mpirun every rank reads its own flags, config
// file and data, so ranks started differently — another --steps on one host,
// a stale copy of train.bin — issue different collectives and wait out the
// timeout (five minutes by default) before they can say anything, and then
// only that a collective timed out. So at start every rank's resolved
// configuration, and the sizes of the files it reads, are compared with
// rank 0's, and the first difference stops every rank with one line:
//
//   rank 1 was started with --steps 5, rank 0 with --steps 3
//
// Left out: what may differ by host (--threads, the paths of --out and
// --trace, where --data, --val-data and --init lie: their sizes are compared).
//
//   check_ranks_agree(*world, cfg);   // a collective: every rank, right after the world group forms
//
// Resuming, likewise, the ranks must try the same checkpoints in the same
// order, though each lists its own --out: one whose directory lacks them (a
// host's own disk, a node that replaced a dead one) would otherwise skip
// ahead to step 1 while the others restore.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "artel/comm/process_group.h"
#include "artel/train/train_config.h"

namespace artel::train {

void check_ranks_agree(comm::ProcessGroup& world, const TrainConfig& cfg);

// Of `mine` (this rank's checkpoint directories under `dir`, newest first),
// those every rank of `world` lists too, by name, in the same order on every
// rank; `warn` gets a line for each left out. Throws when some rank lists
// checkpoints but none is listed by all, naming a rank that lacks them.
// Collective.
std::vector<std::string> checkpoints_every_rank_sees(comm::ProcessGroup& world, const std::vector<std::string>& mine,
                                                     const std::string& dir,
                                                     const std::function<void(const std::string&)>& warn);

}  // namespace artel::train
