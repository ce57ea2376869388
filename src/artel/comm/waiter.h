// Waiting on a shared segment: spin, then yield the core, then sleep on the
// segment's futex word with a timeout — never a hang: each wake-up checks the
// deadline, the group's abort flag and whether the ranks we wait for are
// still alive.
//
// How long to spin depends on whether the job's ranks each have a core
// (WaitPolicy::for_ranks, like OpenMPI's "oversubscribed" yield mode): with a
// core each, the peer runs right now and is usually < 20 µs away, so a rank
// spins tens of µs rather than pay a system call (a sched_yield on a busy
// machine can hand the core to another program for a whole time slice); with
// more ranks than cores the peer may need *our* core, so a rank yields almost
// at once.
//
//   WaitPolicy policy = WaitPolicy::for_ranks(ranks_on_host);
//   WaitTarget w{base, &layout, rank, &policy};
//   wait_until(w, [&] { return peer->epoch.load() >= e; }, ctx, [&] { return missing_ranks(); });
//   notify(seg);   // after publishing anything a peer may wait for
#pragma once

#include <functional>
#include <vector>

#include "artel/comm/segment_layout.h"

namespace artel::comm {

// The spin adapts, as glibc's adaptive mutexes do: other programs may take
// cores from a job that has one per rank, and then a spinning rank only keeps
// its peer off the core. So a sched_yield that took long (someone else ran
// on our core) cuts the spin to its minimum, and one that came straight back
// (nobody wanted the core) while we still waited doubles it, up to max_spin.
struct WaitPolicy {
  Clock::duration max_spin;  // busy-wait (pause) at most this long first
  Clock::duration yield;     // then sched_yield until this long after the start, then sleep
  Clock::duration spin;      // the current spin, adapted in [min(1 µs, max_spin), max_spin]
  // The policy for `ranks` busy ranks on this host (and its available cores).
  static WaitPolicy for_ranks(int ranks);
};

struct WaitTarget {
  std::byte* base;
  const SegmentLayout* layout;
  int self;
  WaitPolicy* policy;  // the waiting rank's, adapted by each wait (one waiter per rank at a time)
};

// Waits until ready() holds. `missing()` lists the ranks being waited for (for
// the TimeoutError and the liveness check). Throws TimeoutError at ctx.deadline,
// Error if the group is aborted or a missing rank left or died.
void wait_until(const WaitTarget& w, const std::function<bool()>& ready, const OpContext& ctx,
                const std::function<std::vector<int>()>& missing);

// A backend whose messages move only while the process calls into it (MPI's
// rendezvous: Note [Progress of buffered sends]) keeps them moving while a
// rank waits here: `progress` runs at each turn of a wait past its spin and
// says whether messages are still in flight (the wait then sleeps at most
// 1 ms at a time). One per process; nullptr removes it.
using WaitProgress = bool (*)();
void set_wait_progress(WaitProgress progress);

// Wakes the sleepers of the segment; call after each store a peer may wait for.
void notify(SegmentHeader* h);

}  // namespace artel::comm
