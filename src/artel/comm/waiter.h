// Waiting on a shared segment: spin briefly (the peer is usually a few hundred
// nanoseconds away), then yield the core (with more ranks than cores the peer
// may need ours), then sleep on the segment's futex word with a timeout —
// never a hang: each wake-up checks the deadline, the group's abort flag and
// whether the ranks we wait for are still alive.
//
//   wait_until(seg, [&] { return peer->epoch.load() >= e; }, ctx, [&] { return missing_ranks(); });
//   notify(seg);   // after publishing anything a peer may wait for
#pragma once

#include <functional>
#include <vector>

#include "artel/comm/segment_layout.h"

namespace artel::comm {

struct WaitTarget {
  std::byte* base;
  const SegmentLayout* layout;
  int self;
};

// Waits until ready() holds. `missing()` lists the ranks being waited for (for
// the TimeoutError and the liveness check). Throws TimeoutError at ctx.deadline,
// Error if the group is aborted or a missing rank left or died.
void wait_until(const WaitTarget& w, const std::function<bool()>& ready, const OpContext& ctx,
                const std::function<std::vector<int>()>& missing);

// Wakes the sleepers of the segment; call after each store a peer may wait for.
void notify(SegmentHeader* h);

}  // namespace artel::comm
