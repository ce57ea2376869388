// Where segments live: POSIX shared memory (/dev/shm, the shm backend) or an
// in-process table (the thread backend). A store creates a segment
// exclusively (a second job with the same name is refused, never joined),
// opens one by name until a deadline, and removes the name; the memory stays
// mapped until the last Segment handle goes.
//
//   auto seg = store.create("/artel-job42", bytes);    // zeroed, fully backed
//   store.back(*seg, offset, len);                     // a part left to its rank, backed by it
//
// Note [Each rank backs its own registered memory]
// Backing a page of shared memory charges it to the memory cgroup of the
// process that backs it (--memory-per-worker). Rank 0 creates a group's
// segment; when it backed all of it, it carried every rank's registered
// memory (64 MiB a rank by default) besides its own: 266 MiB for a group of
// 4, so that a worker 0 ran out of memory under a limit its peers kept to.
// Rank 0 now backs only the shared head (header, controls, scratch, message
// rings), and each rank backs its own arena's pages as its alloc first hands
// them out (comm/arena.h), before any peer can touch them: an error is said
// there, where the caller can still take plain memory instead, never as a
// SIGBUS later. A rank is charged what it registers, not the whole arena: a
// W1 worker (2.7 MB of gradient buckets) held 64 MiB of shared memory when
// each rank backed its arena whole as it joined, and ran out of memory under
// --memory-per-worker 100M.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "artel/comm/transport.h"

namespace artel::comm {

// A mapping of one segment into this process.
struct Segment {
  std::byte* base = nullptr;
  size_t bytes = 0;
  int fd = -1;  // POSIX: kept open for back(); closed by release
  std::string name;
  std::function<void()> release;
  ~Segment() {
    if (release) release();
  }
};

class SegmentStore {
 public:
  virtual ~SegmentStore() = default;
  // A zeroed segment of `bytes`, its first `backed` bytes backed now (all of
  // it by default). Throws Error if `name` exists or the memory cannot be
  // had (e.g. /dev/shm full, or over --memory-per-worker).
  virtual std::shared_ptr<Segment> create(const std::string& name, size_t bytes, size_t backed) = 0;
  std::shared_ptr<Segment> create(const std::string& name, size_t bytes) { return create(name, bytes, bytes); }
  // Backs [offset, offset + len) of `seg`, charged to this process; throws
  // as create does. A no-op where memory is ordinary (the thread store).
  virtual void back(Segment& seg, size_t offset, size_t len) = 0;
  // Waits for `name` to appear; throws TimeoutError (naming `who`) at `deadline`.
  virtual std::shared_ptr<Segment> open(const std::string& name, Clock::time_point deadline, const std::string& who) = 0;
  // Removes the name (not the memory); no error if it is gone.
  virtual void remove(const std::string& name) = 0;
};

std::shared_ptr<SegmentStore> posix_segment_store();
std::shared_ptr<SegmentStore> thread_segment_store();  // one per process

// Removes a job's POSIX segments (e.g. by the launcher after killing its
// workers); returns how many names it removed.
int remove_job_segments(const std::string& job_id);

}  // namespace artel::comm
