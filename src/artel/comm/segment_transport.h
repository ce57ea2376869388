// SegmentTransport: Transport + SharedMemory over one shared segment
// (segment_layout.h) — the shm backend (POSIX shared memory between
// processes) and the thread backend (ordinary memory between threads) differ
// only in their SegmentStore.
//
// Rendezvous: group rank 0 creates the segment exclusively, the others open
// it by name until the deadline; each claims its rank slot, and once all have,
// the name is removed — so nothing is left in /dev/shm even if a worker is
// killed later, and a second job with the same id can neither join nor
// disturb this one.
//
//   SegmentConfig cfg{.store = posix_segment_store(), .name = "/artel-42", .rank = r, .world = n};
//   auto t = SegmentTransport::connect(cfg, opts.timeout);
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "artel/comm/arena.h"
#include "artel/comm/segment_layout.h"
#include "artel/comm/segment_store.h"
#include "artel/comm/waiter.h"

namespace artel::comm {

struct SegmentConfig {
  std::shared_ptr<SegmentStore> store;
  std::string name;  // the segment's name in the store
  int rank = 0, world = 1;
  int host_ranks = 0;  // ranks of the whole job on this host (0: world); subgroups keep their parent's
  size_t half_bytes = 1 << 20, channel_bytes = 128 << 10, arena_bytes = 64 << 20;  // arena: at most what arena_within_address_space allows
  Duration timeout = std::chrono::minutes(5);  // for the rendezvous
};

class SegmentTransport final : public Transport, public SharedMemory {
 public:
  static std::unique_ptr<SegmentTransport> connect(const SegmentConfig& cfg);
  ~SegmentTransport() override;

  // Transport
  int rank() const override { return rank_; }
  int size() const override { return world_; }
  void send(int dst, Tag tag, const void* data, size_t nbytes, const OpContext& ctx) override;
  void recv(int src, Tag tag, void* data, size_t nbytes, const OpContext& ctx) override;
  void send_recv(int dst, Tag send_tag, const void* send_data, size_t send_bytes, int src, Tag recv_tag, void* recv_data,
                 size_t recv_bytes, const OpContext& ctx) override;
  bool try_send(int dst, Tag tag, const void* data, size_t nbytes, const OpContext& ctx) override;
  void enter(uint64_t seq) override;
  std::vector<int> missing(uint64_t seq) const override;
  void abort() override;
  std::unique_ptr<Transport> split(const std::vector<int>& ranks, const std::string& id,
                                   const GroupOptions& opts) override;
  Tensor alloc(const Shape& shape, DType dtype) override { return arena_->alloc(shape, dtype); }
  SharedMemory* shared() override { return this; }

  // SharedMemory
  size_t half_bytes() const override { return layout_.half_bytes; }
  std::byte* write_half() override { return half(rank_, epoch_ & 1) + kHeaderBytes; }
  const std::byte* read_half(int r) const override { return half(r, (epoch_ + 1) & 1) + kHeaderBytes; }
  uint64_t* write_words() override { return reinterpret_cast<uint64_t*>(half(rank_, epoch_ & 1)); }
  const uint64_t* read_words(int r) const override { return reinterpret_cast<const uint64_t*>(half(r, (epoch_ + 1) & 1)); }
  void sync(const OpContext& ctx) override;
  uint64_t handle_of(const void* p, size_t nbytes) const override;
  std::byte* resolve(int r, uint64_t handle) const override { return layout_.arena(base_, r) + handle; }

 private:
  SegmentTransport(const SegmentConfig& cfg, std::shared_ptr<Segment> seg, const SegmentLayout& layout);
  void rendezvous(bool creator, Clock::time_point deadline);
  std::byte* half(int r, int h) const { return layout_.half(base_, r, h); }
  WaitTarget target() const { return {base_, &layout_, rank_, &policy_}; }

  // Point-to-point over the byte rings (segment_channels.cpp).
  struct Message {
    Tag tag;
    std::vector<std::byte> data;
  };
  struct Inbound {  // what we have read from one peer's ring
    bool mid = false;  // inside a message being stashed
    Tag tag = 0;
    size_t total = 0;
    std::vector<std::byte> buf;
    std::deque<Message> done;  // complete messages nobody asked for yet
  };
  void write_bytes(int dst, const std::byte* p, size_t n, const OpContext& ctx);
  void read_bytes(int src, std::byte* p, size_t n, const OpContext& ctx);
  size_t readable(int src) const;
  size_t writable(int dst) const;
  bool pump(int src);  // moves available bytes of `src` into stashes; true if any
  void pump_all();
  bool take_stashed(int src, Tag tag, void* data, size_t nbytes, const OpContext& ctx);

  SegmentConfig cfg_;
  std::shared_ptr<Segment> seg_;
  SegmentLayout layout_;
  std::byte* base_;
  int rank_, world_;
  uint64_t epoch_ = 0;
  mutable WaitPolicy policy_;  // adapted by every wait (waiter.h)
  std::shared_ptr<Arena> arena_;
  std::vector<Inbound> inbound_;
  std::atomic<bool> aborted_{false};
};

}  // namespace artel::comm
