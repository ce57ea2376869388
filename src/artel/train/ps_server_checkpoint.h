// A parameter server's shard of a checkpoint (Note [Sharded checkpoints] in
// strategy.h). A server holds flat ranges of whole parameters and their
// optimizer state, as a ZeRO-3 rank does, so it writes and reads the same
// parts: "model/<name>" over its elements, the optimizer's buffers over the
// same, and the step count of a parameter whose first element it holds.
// Any layout reads the result: a parameter-server run resumes from a
// data-parallel checkpoint and the other way round. Worker 0 writes shard 0
// (its dropout generator); server i writes shard 1 + i.
//
//   PsServerOptions o{..., .save = save_ps_shard(keep), .restore = restore_ps_shard()};
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "artel/parallel/ps_server.h"

namespace artel::train {

// The hooks a server calls (parallel/ps_server.h): write its shard of the
// checkpoint of `step` into the run's checkpoint folder (keeping `keep_last`
// as the run does), and read it back from a checkpoint directory.
std::function<void(const parallel::PsShard&, int64_t, const std::string&)> save_ps_shard(int64_t keep_last);
std::function<void(const parallel::PsShard&, const std::string&)> restore_ps_shard();

}  // namespace artel::train
