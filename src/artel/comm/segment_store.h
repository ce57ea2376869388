// Where segments live: POSIX shared memory (/dev/shm, the shm backend) or an
// in-process table (the thread backend). A store creates a segment
// exclusively (a second job with the same name is refused, never joined),
// opens one by name until a deadline, and removes the name; the memory stays
// mapped until the last Segment handle goes.
//
//   auto seg = store.create("/artel-job42", bytes);    // zeroed, fully backed
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
  std::function<void()> release;
  ~Segment() {
    if (release) release();
  }
};

class SegmentStore {
 public:
  virtual ~SegmentStore() = default;
  // Throws Error if `name` exists or the memory cannot be had (e.g. /dev/shm full).
  virtual std::shared_ptr<Segment> create(const std::string& name, size_t bytes) = 0;
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
