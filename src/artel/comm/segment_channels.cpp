// SegmentTransport's point-to-point messages: one byte ring per ordered pair
// of ranks in the segment. A message is a 16-byte header (tag, size) and its
// payload, streamed through the ring in pieces as space frees up.
//
// Note [No send-send deadlock]: a sender that finds its ring full drains its
// own incoming rings into local stashes while it waits, so two ranks sending
// large messages to each other (or a ring of them) always progress; recv looks
// in the stash first. A message that is the next one in the ring and matches
// the recv is read straight into the caller's buffer, with no extra copy.
#include <algorithm>

#include "artel/comm/segment_transport.h"

namespace artel::comm {
namespace {

struct WireHeader {
  uint64_t tag, nbytes;
};

void check_peer(int peer, int world, const OpContext& ctx) {
  ARTEL_CHECK(peer >= 0 && peer < world, ctx.describe(), ": rank ", peer, " is outside the group of ", world, " ranks");
}

Error size_mismatch(int src, size_t sent, size_t expected, const OpContext& ctx) {
  return Error(ctx.describe() + ": rank " + std::to_string(src) + " sent " + std::to_string(sent) +
                   " bytes where this rank expects " + std::to_string(expected),
               "every rank must pass tensors of matching sizes and dtypes");
}

}  // namespace

size_t SegmentTransport::readable(int src) const {
  ChannelControl* ch = layout_.channel(base_, src, rank_);
  return ch->head.load(std::memory_order_acquire) - ch->tail.load(std::memory_order_relaxed);
}

size_t SegmentTransport::writable(int dst) const {
  ChannelControl* ch = layout_.channel(base_, rank_, dst);
  return layout_.channel_bytes - (ch->head.load(std::memory_order_relaxed) - ch->tail.load(std::memory_order_acquire));
}

void SegmentTransport::write_bytes(int dst, const std::byte* p, size_t n, const OpContext& ctx) {
  ChannelControl* ch = layout_.channel(base_, rank_, dst);
  std::byte* ring = layout_.channel_data(base_, rank_, dst);
  const size_t cap = layout_.channel_bytes;
  uint64_t head = ch->head.load(std::memory_order_relaxed);
  while (n > 0) {
    size_t space = cap - (head - ch->tail.load(std::memory_order_acquire));
    if (space == 0) {
      pump_all();  // Note [No send-send deadlock]
      wait_until(target(),
                 [&] {
                   if (ch->tail.load(std::memory_order_acquire) + cap > head) return true;
                   for (int s = 0; s < world_; ++s)
                     if (s != rank_ && readable(s) >= (inbound_[s].mid ? 1 : sizeof(WireHeader))) return true;
                   return false;
                 },
                 ctx, [&] { return std::vector<int>{dst}; });
      continue;
    }
    size_t pos = head % cap, len = std::min({n, space, cap - pos});
    std::memcpy(ring + pos, p, len);
    p += len, n -= len, head += len;
    ch->head.store(head, std::memory_order_release);
    notify(SegmentLayout::header(base_));
  }
}

void SegmentTransport::read_bytes(int src, std::byte* p, size_t n, const OpContext& ctx) {
  ChannelControl* ch = layout_.channel(base_, src, rank_);
  const std::byte* ring = layout_.channel_data(base_, src, rank_);
  const size_t cap = layout_.channel_bytes;
  uint64_t tail = ch->tail.load(std::memory_order_relaxed);
  while (n > 0) {
    size_t avail = ch->head.load(std::memory_order_acquire) - tail;
    if (avail == 0) {
      wait_until(target(), [&] { return ch->head.load(std::memory_order_acquire) != tail; }, ctx,
                 [&] { return std::vector<int>{src}; });
      continue;
    }
    size_t pos = tail % cap, len = std::min({n, avail, cap - pos});
    if (p) std::memcpy(p, ring + pos, len), p += len;
    n -= len, tail += len;
    ch->tail.store(tail, std::memory_order_release);
    notify(SegmentLayout::header(base_));
  }
}

bool SegmentTransport::pump(int src) {
  Inbound& in = inbound_[src];
  bool moved = false;
  for (;;) {
    size_t avail = readable(src);
    if (!in.mid) {
      if (avail < sizeof(WireHeader)) return moved;
      WireHeader hdr;
      OpContext none;
      read_bytes(src, reinterpret_cast<std::byte*>(&hdr), sizeof hdr, none);
      in.mid = true, in.tag = hdr.tag, in.total = hdr.nbytes;
      in.buf.clear();
      in.buf.reserve(hdr.nbytes);
      avail -= sizeof hdr;
      moved = true;
    }
    size_t len = std::min(avail, in.total - in.buf.size());
    if (len > 0) {
      size_t old = in.buf.size();
      in.buf.resize(old + len);
      OpContext none;
      read_bytes(src, in.buf.data() + old, len, none);
      moved = true;
    }
    if (in.buf.size() < in.total) return moved;
    in.done.push_back({in.tag, std::move(in.buf)});
    in.buf = {};
    in.mid = false;
  }
}

void SegmentTransport::pump_all() {
  for (int s = 0; s < world_; ++s)
    if (s != rank_) pump(s);
}

bool SegmentTransport::take_stashed(int src, Tag tag, void* data, size_t nbytes, const OpContext& ctx) {
  auto& done = inbound_[src].done;
  auto it = std::find_if(done.begin(), done.end(), [&](const Message& m) { return m.tag == tag; });
  if (it == done.end()) return false;
  Message m = std::move(*it);
  done.erase(it);
  if (m.data.size() != nbytes) throw size_mismatch(src, m.data.size(), nbytes, ctx);
  if (nbytes) std::memcpy(data, m.data.data(), nbytes);
  return true;
}

void SegmentTransport::send(int dst, Tag tag, const void* data, size_t nbytes, const OpContext& ctx) {
  check_peer(dst, world_, ctx);
  if (dst == rank_) {  // to self: straight into the stash
    auto* p = static_cast<const std::byte*>(data);
    inbound_[rank_].done.push_back({tag, std::vector<std::byte>(p, p + nbytes)});
    return;
  }
  WireHeader hdr{tag, nbytes};
  write_bytes(dst, reinterpret_cast<const std::byte*>(&hdr), sizeof hdr, ctx);
  write_bytes(dst, static_cast<const std::byte*>(data), nbytes, ctx);
}

bool SegmentTransport::try_send(int dst, Tag tag, const void* data, size_t nbytes, const OpContext& ctx) {
  check_peer(dst, world_, ctx);
  // Only this rank writes the ring and the reader only frees space, so room
  // seen now stays: the writes below never wait.
  if (dst != rank_ && writable(dst) < sizeof(WireHeader) + nbytes) return false;
  send(dst, tag, data, nbytes, ctx);
  return true;
}

void SegmentTransport::recv(int src, Tag tag, void* data, size_t nbytes, const OpContext& ctx) {
  check_peer(src, world_, ctx);
  Inbound& in = inbound_[src];
  for (;;) {
    if (take_stashed(src, tag, data, nbytes, ctx)) return;
    ARTEL_CHECK(src != rank_, ctx.describe(), ": a receive from this rank itself has no matching send");
    if (!in.mid && readable(src) >= sizeof(WireHeader)) {
      WireHeader hdr;
      ChannelControl* ch = layout_.channel(base_, src, rank_);
      const std::byte* ring = layout_.channel_data(base_, src, rank_);
      uint64_t tail = ch->tail.load(std::memory_order_relaxed);
      for (size_t i = 0; i < sizeof hdr; ++i)  // peek: the header may wrap around the ring
        reinterpret_cast<std::byte*>(&hdr)[i] = ring[(tail + i) % layout_.channel_bytes];
      if (hdr.tag == tag) {  // next in the ring and ours: no stash copy
        read_bytes(src, nullptr, sizeof hdr, ctx);
        if (hdr.nbytes != nbytes) {
          read_bytes(src, nullptr, hdr.nbytes, ctx);
          throw size_mismatch(src, hdr.nbytes, nbytes, ctx);
        }
        read_bytes(src, static_cast<std::byte*>(data), nbytes, ctx);
        return;
      }
    }
    if (pump(src)) continue;
    wait_until(target(), [&] { return readable(src) > 0; }, ctx, [&] { return std::vector<int>{src}; });
  }
}

void SegmentTransport::send_recv(int dst, Tag send_tag, const void* send_data, size_t send_bytes, int src, Tag recv_tag,
                                 void* recv_data, size_t recv_bytes, const OpContext& ctx) {
  send(dst, send_tag, send_data, send_bytes, ctx);
  recv(src, recv_tag, recv_data, recv_bytes, ctx);
}

}  // namespace artel::comm
