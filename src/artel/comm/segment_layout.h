// The layout of a job's shared segment (shm backend; the thread backend uses
// the same layout in ordinary memory). Every field a peer reads is atomic; the
// memory starts zeroed, so a zero is every field's initial value.
//
//   [SegmentHeader][RankControl × N][scratch: N × 2 halves][channels: N × N rings][arenas: N × registered_bytes]
//
//   SegmentLayout lay = SegmentLayout::make(world, half_bytes, channel_bytes, arena_bytes);
//   auto* rc = lay.rank_control(base, r);
//
// Note [Registered memory is address space first]
// A rank's arena is address space until its alloc hands pages out, and only
// then memory (Note [Each rank backs its own registered memory],
// segment_store.h). So it is large by default (8 GiB a rank,
// GroupOptions::registered_bytes): every gradient bucket of a GPT-2 (500
// MB) and, under ZeRO-1, its weights are registered, and their collectives
// read the peers' buffers in place. At the earlier 64 MiB, a GPT-2's
// buckets beyond it were plain memory whose collectives staged every byte
// through the scratch halves; on two workers that was most of its exposed
// communication. The segment's file is sparse on /dev/shm, and its mapping
// costs page tables only where pages are touched. Under an address-space
// limit (prlimit --as, ulimit -v) the arenas of one group take at most an
// eighth of it (arena_within_address_space), so a limited worker still
// starts; registered memory beyond is plain memory, as when /dev/shm is full.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "artel/comm/transport.h"

namespace artel::comm {

constexpr uint64_t kSegmentMagic = 0x6d68736c65747261ull;  // "artelshm"
constexpr uint32_t kSegmentVersion = 1;

struct SegmentHeader {
  uint64_t magic;
  uint32_t version;
  int32_t world;
  uint64_t half_bytes, channel_bytes, arena_bytes, total_bytes;
  alignas(64) std::atomic<uint32_t> ready;     // the creator finished writing the header
  std::atomic<uint32_t> attached;              // ranks that claimed their slot
  alignas(64) std::atomic<uint32_t> futex;     // bumped on every event; sleepers wait on it
  alignas(64) std::atomic<uint32_t> sleepers;  // ranks sleeping on `futex` (wakers skip the syscall at 0)
};

struct alignas(128) RankControl {
  std::atomic<uint64_t> epoch;     // barriers entered (SharedMemory::sync)
  std::atomic<uint64_t> seq;       // last collective entered (for naming missing ranks)
  std::atomic<int32_t> pid;
  std::atomic<uint32_t> claimed;   // a worker took this rank
  std::atomic<uint32_t> departed;  // the worker's group was destroyed
};

// A ring of bytes from one rank to another; `head` and `tail` count bytes
// written and consumed since the start.
struct ChannelControl {
  alignas(64) std::atomic<uint64_t> head;
  alignas(64) std::atomic<uint64_t> tail;
};

struct SegmentLayout {
  int world = 0;
  size_t half_bytes = 0, channel_bytes = 0, arena_bytes = 0;
  size_t ranks_off = 0, scratch_off = 0, half_stride = 0, chan_off = 0, chan_stride = 0, arena_off = 0, total = 0;

  static SegmentLayout make(int world, size_t half_bytes, size_t channel_bytes, size_t arena_bytes);

  static SegmentHeader* header(std::byte* base) { return reinterpret_cast<SegmentHeader*>(base); }
  RankControl* rank_control(std::byte* base, int r) const {
    return reinterpret_cast<RankControl*>(base + ranks_off) + r;
  }
  // Half h (0/1) of rank r: SharedMemory::kHeaderBytes of posted words, then data.
  std::byte* half(std::byte* base, int r, int h) const { return base + scratch_off + (2 * r + h) * half_stride; }
  ChannelControl* channel(std::byte* base, int src, int dst) const {
    return reinterpret_cast<ChannelControl*>(base + chan_off + (src * world + dst) * chan_stride);
  }
  std::byte* channel_data(std::byte* base, int src, int dst) const {
    return reinterpret_cast<std::byte*>(channel(base, src, dst)) + sizeof(ChannelControl);
  }
  std::byte* arena(std::byte* base, int r) const { return base + arena_off + r * arena_bytes; }
};

inline size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// Each of `world` arenas of `arena_bytes`, cut to page multiples that take
// at most an eighth of `address_limit` together (Note [Registered memory is
// address space first]); 0 = no limit.
inline size_t arena_within_address_space(size_t arena_bytes, int world, size_t address_limit) {
  if (address_limit == 0) return arena_bytes;
  const size_t most = address_limit / 8 / static_cast<size_t>(world) / 4096 * 4096;
  return arena_bytes < most ? arena_bytes : most;
}

inline SegmentLayout SegmentLayout::make(int world, size_t half_bytes, size_t channel_bytes, size_t arena_bytes) {
  SegmentLayout l;
  l.world = world;
  l.half_bytes = round_up(half_bytes, 64);
  l.channel_bytes = channel_bytes;
  l.arena_bytes = round_up(arena_bytes, 4096);
  l.ranks_off = round_up(sizeof(SegmentHeader), 128);
  l.scratch_off = round_up(l.ranks_off + world * sizeof(RankControl), 4096);
  l.half_stride = round_up(SharedMemory::kHeaderBytes + l.half_bytes, 4096);
  l.chan_off = l.scratch_off + 2 * world * l.half_stride;
  l.chan_stride = round_up(sizeof(ChannelControl) + channel_bytes, 4096);
  l.arena_off = l.chan_off + static_cast<size_t>(world) * world * l.chan_stride;
  l.total = l.arena_off + world * l.arena_bytes;
  return l;
}

}  // namespace artel::comm
