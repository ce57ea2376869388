// Arena: this rank's registered memory inside a shared segment, handed out as
// tensors (ProcessGroup::alloc). First-fit over a free list, 64-byte aligned;
// a tensor returns its block when its storage is released. Only the owning
// rank allocates from its arena, so no cross-process locking is needed.
//
//   Arena arena(segment, base, bytes);
//   Tensor t = arena.alloc({1024}, DType::f32, arena_ptr);
#pragma once

#include <map>
#include <memory>
#include <mutex>

#include "artel/comm/segment_store.h"

namespace artel::comm {

class Arena : public std::enable_shared_from_this<Arena> {
 public:
  Arena(std::shared_ptr<Segment> segment, std::byte* base, size_t bytes);
  // Throws Error when no free block is large enough.
  Tensor alloc(const Shape& shape, DType dtype);
  bool contains(const void* p, size_t nbytes) const;
  std::byte* base() const { return base_; }
  size_t used() const;

 private:
  void release(size_t offset, size_t bytes);

  std::shared_ptr<Segment> segment_;  // keeps the mapping alive while tensors live
  std::byte* base_;
  size_t bytes_;
  mutable std::mutex mu_;
  std::map<size_t, size_t> free_;  // offset -> length
};

}  // namespace artel::comm
