#include "artel/comm/arena.h"

#include "artel/comm/segment_layout.h"

namespace artel::comm {
namespace {
constexpr size_t kPageBytes = 4096;
}  // namespace

Arena::Arena(std::shared_ptr<Segment> segment, std::byte* base, size_t bytes, Backer back)
    : segment_(std::move(segment)), base_(base), bytes_(bytes), back_(std::move(back)) {
  if (bytes) free_[0] = bytes;
}

Tensor Arena::alloc(const Shape& shape, DType dtype) {
  size_t nbytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  size_t want = round_up(std::max<size_t>(nbytes, 1), 64);
  std::lock_guard lock(mu_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < want) continue;
    size_t off = it->first, len = it->second;
    if (off + want > backed_) {  // pages nobody has had yet: back them first, whole pages
      const size_t end = std::min(bytes_, round_up(off + want, kPageBytes));
      back_(backed_, end - backed_);  // throws with the free list untouched
      backed_ = end;
    }
    free_.erase(it);
    if (len > want) free_[off + want] = len - want;
    auto self = shared_from_this();
    auto storage = Storage::wrap(base_ + off, nbytes, [self, off, want] { self->release(off, want); });
    return Tensor::wrap(storage, shape, dtype);
  }
  size_t free_bytes = 0;
  for (const auto& [off, len] : free_) free_bytes += len;
  throw Error("registered memory exhausted: cannot allocate " + std::to_string(nbytes) + " bytes (" +
                  std::to_string(bytes_ - free_bytes) + " of " + std::to_string(bytes_) + " in use)",
              "raise GroupOptions::registered_bytes, or free registered tensors");
}

bool Arena::contains(const void* p, size_t nbytes) const {
  auto* b = static_cast<const std::byte*>(p);
  return b >= base_ && b + nbytes <= base_ + bytes_;
}

size_t Arena::backed() const {
  std::lock_guard lock(mu_);
  return backed_;
}

size_t Arena::used() const {
  std::lock_guard lock(mu_);
  size_t free_bytes = 0;
  for (const auto& [off, len] : free_) free_bytes += len;
  return bytes_ - free_bytes;
}

void Arena::release(size_t offset, size_t bytes) {
  std::lock_guard lock(mu_);
  auto [it, inserted] = free_.emplace(offset, bytes);
  auto next = std::next(it);
  if (next != free_.end() && it->first + it->second == next->first) {
    it->second += next->second;
    free_.erase(next);
  }
  if (it != free_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      free_.erase(it);
    }
  }
}

}  // namespace artel::comm
