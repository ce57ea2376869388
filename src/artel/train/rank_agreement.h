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
#pragma once

#include "artel/comm/process_group.h"
#include "artel/train/train_config.h"

namespace artel::train {

void check_ranks_agree(comm::ProcessGroup& world, const TrainConfig& cfg);

}  // namespace artel::train
