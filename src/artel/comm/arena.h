// Arena: this rank's registered memory inside a shared segment, handed out as
// tensors (ProcessGroup::alloc). First-fit over a free list, 64-byte aligned;
// a tensor returns its block when its storage is released. Only the owning
// rank allocates from its arena, so no cross-process locking is needed.
// Its pages are backed as alloc first hands them out (Note [Each rank backs
// its own registered memory], segment_store.h), so a rank holds what it
// registers, not the whole arena.
//
//   Arena arena(segment, base, bytes, [&](size_t off, size_t len) { store.back(seg, arena_off + off, len); });
//   Tensor t = arena.alloc({1024}, DType::f32);
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "artel/comm/segment_store.h"

namespace artel::comm {

class Arena : public std::enable_shared_from_this<Arena> {
 public:
  // Backs [offset, offset + len) of the arena; throws as SegmentStore::back does.
  using Backer = std::function<void(size_t offset, size_t len)>;
  Arena(std::shared_ptr<Segment> segment, std::byte* base, size_t bytes, Backer back);
  // Throws Error when no free block is large enough or its pages cannot be
  // backed (over --memory-per-worker, /dev/shm full); the arena is then as before.
  Tensor alloc(const Shape& shape, DType dtype);
  bool contains(const void* p, size_t nbytes) const;
  std::byte* base() const { return base_; }
  size_t used() const;
  size_t backed() const;  // bytes from the arena's start backed so far

 private:
  void release(size_t offset, size_t bytes);

  std::shared_ptr<Segment> segment_;  // keeps the mapping alive while tensors live
  std::byte* base_;
  size_t bytes_;
  Backer back_;
  size_t backed_ = 0;  // first-fit hands out low offsets first, so a high-water mark covers every block
  mutable std::mutex mu_;
  std::map<size_t, size_t> free_;  // offset -> length
};

}  // namespace artel::comm
