// What DDP and FSDP both ask of their process group: buffers in its
// registered memory when it has room, and a scalar summed over its ranks.
// Internal to the parallel layer.
#pragma once

#include <cstdint>

#include "artel/comm/process_group.h"

namespace artel::parallel {

// Registered memory while the group has room (GroupOptions::registered_bytes)
// and /dev/shm has room for its pages (said once a process when it has not),
// else plain memory: the collectives then stage through the scratch buffers,
// slower but the same result. Ranks may differ (one finds /dev/shm full):
// each collective's handshake asks whether every rank's buffer is registered.
// `registered` (may be null) adds the bytes when the memory is the group's.
// Zeroed from element `zero_from` on (all of it by default).
Tensor registered_or_plain(comm::ProcessGroup& group, int64_t numel, int64_t* registered = nullptr,
                           int64_t zero_from = 0);

// Sharded buffers (ZeRO's buckets, FSDP's units) start each rank's block on a
// 64-byte line: a multiple of this many floats.
inline constexpr int64_t kBlockAlign = 16;

// `value` summed over the group's ranks (a gradient norm's squares). Collective.
double sum_over(comm::ProcessGroup& group, double value);

}  // namespace artel::parallel
