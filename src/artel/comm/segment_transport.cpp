#include "artel/comm/segment_transport.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "artel/comm/progress.h"

namespace artel::comm {
namespace {

std::string seconds_text(std::chrono::duration<double> d) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", d.count());
  return text;
}

void check_header(const SegmentHeader* h, const Segment& seg, const SegmentConfig& cfg) {
  if (h->magic != kSegmentMagic || h->version != kSegmentVersion || h->total_bytes != seg.bytes)
    throw Error("segment " + cfg.name + " is not an artel segment of this version",
                "another program uses this name; pick another job id");
  if (h->world != cfg.world)
    throw Error("segment " + cfg.name + " belongs to a job of " + std::to_string(h->world) + " ranks, this rank expects " +
                    std::to_string(cfg.world),
                "start every worker with the same world size, or pick another job id");
}

// The process's address-space limit (RLIMIT_AS) in bytes; 0 when unlimited.
size_t address_space_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 0;
  return static_cast<size_t>(r.rlim_cur);
}

}  // namespace

std::unique_ptr<SegmentTransport> SegmentTransport::connect(const SegmentConfig& cfg) {
  ARTEL_CHECK(cfg.world >= 1 && cfg.rank >= 0 && cfg.rank < cfg.world, "rank ", cfg.rank, " is outside a world of ",
              cfg.world, " ranks (need 0 <= rank < world_size)");
  ARTEL_CHECK(cfg.half_bytes >= 4096, "staging_bytes must be >= 4096, got ", cfg.half_bytes);
  ARTEL_CHECK(cfg.channel_bytes >= 64, "message_bytes must be >= 64, got ", cfg.channel_bytes);
  const auto deadline = Clock::now() + cfg.timeout;
  const bool creator = cfg.rank == 0;
  std::shared_ptr<Segment> seg;
  SegmentLayout layout;
  if (creator) {
    layout = SegmentLayout::make(cfg.world, cfg.half_bytes, cfg.channel_bytes,
                                 arena_within_address_space(cfg.arena_bytes, cfg.world, address_space_limit()));
    // Note [Each rank backs its own registered memory] (segment_store.h): the head only.
    seg = cfg.store->create(cfg.name, layout.total, layout.arena_off);
    SegmentHeader* h = SegmentLayout::header(seg->base);
    h->magic = kSegmentMagic, h->version = kSegmentVersion, h->world = cfg.world;
    h->half_bytes = layout.half_bytes, h->channel_bytes = layout.channel_bytes, h->arena_bytes = layout.arena_bytes;
    h->total_bytes = layout.total;
    h->ready.store(1, std::memory_order_release);
  } else {
    seg = cfg.store->open(cfg.name, deadline, "rank 0 (which creates it)");
    SegmentHeader* h = SegmentLayout::header(seg->base);
    while (!h->ready.load(std::memory_order_acquire)) {
      if (Clock::now() >= deadline)
        throw TimeoutError("segment " + cfg.name + " was not initialised by rank 0 within the timeout (" +
                               seconds_text(cfg.timeout) + ")",
                           "check rank 0's output; if it was only slow to start, raise the timeout (--timeout)");
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    check_header(h, *seg, cfg);
    layout = SegmentLayout::make(cfg.world, h->half_bytes, h->channel_bytes, h->arena_bytes);
  }
  std::unique_ptr<SegmentTransport> t(new SegmentTransport(cfg, seg, layout));
  t->rendezvous(creator, deadline);
  return t;
}

SegmentTransport::SegmentTransport(const SegmentConfig& cfg, std::shared_ptr<Segment> seg, const SegmentLayout& layout)
    : cfg_(cfg), seg_(std::move(seg)), layout_(layout), base_(seg_->base), rank_(cfg.rank), world_(cfg.world),
      policy_(WaitPolicy::for_ranks(cfg.host_ranks > 0 ? cfg.host_ranks : cfg.world)), inbound_(cfg.world) {
  // Note [Each rank backs its own registered memory] (segment_store.h): as alloc hands it out.
  const size_t arena_off = layout_.arena_off + static_cast<size_t>(rank_) * layout_.arena_bytes;
  arena_ = std::make_shared<Arena>(seg_, layout_.arena(base_, rank_), layout_.arena_bytes,
                                   [store = cfg_.store, seg = seg_.get(), arena_off](size_t off, size_t len) {
                                     store->back(*seg, arena_off + off, len);
                                   });
}

// Claims this rank's slot, then waits for all ranks; the last to claim removes
// the name. On a timeout the name is removed too, so nothing leaks.
void SegmentTransport::rendezvous(bool creator, Clock::time_point deadline) {
  SegmentHeader* h = SegmentLayout::header(base_);
  RankControl* me = layout_.rank_control(base_, rank_);
  uint32_t expected = 0;
  if (!me->claimed.compare_exchange_strong(expected, 1))
    throw Error("rank " + std::to_string(rank_) + " of segment " + cfg_.name + " is already taken",
                "another job runs with the same job id; give each job its own id");
  me->pid.store(getpid(), std::memory_order_relaxed);
  if (h->attached.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<uint32_t>(world_)) cfg_.store->remove(cfg_.name);
  notify(h);
  OpContext ctx{"init_process_group", 0, cfg_.name, deadline};
  auto missing = [&] {
    std::vector<int> m;
    for (int r = 0; r < world_; ++r)
      if (!layout_.rank_control(base_, r)->claimed.load(std::memory_order_acquire)) m.push_back(r);
    return m;
  };
  try {
    wait_until(target(), [&] { return h->attached.load(std::memory_order_acquire) == static_cast<uint32_t>(world_); },
               ctx, missing);
  } catch (...) {
    cfg_.store->remove(cfg_.name);
    throw;
  }
  (void)creator;
}

SegmentTransport::~SegmentTransport() { abort(); }

void SegmentTransport::abort() {
  if (aborted_.exchange(true)) return;
  layout_.rank_control(base_, rank_)->departed.store(1, std::memory_order_release);
  notify(SegmentLayout::header(base_));
}

void SegmentTransport::enter(uint64_t seq) {
  layout_.rank_control(base_, rank_)->seq.store(seq, std::memory_order_release);
}

std::vector<int> SegmentTransport::missing(uint64_t seq) const {
  std::vector<int> m;
  for (int r = 0; r < world_; ++r)
    if (layout_.rank_control(base_, r)->seq.load(std::memory_order_acquire) < seq) m.push_back(r);
  return m;
}

void SegmentTransport::sync(const OpContext& ctx) {
  const uint64_t e = ++epoch_;
  layout_.rank_control(base_, rank_)->epoch.store(e, std::memory_order_release);
  notify(SegmentLayout::header(base_));
  auto arrived = [&](int r) { return layout_.rank_control(base_, r)->epoch.load(std::memory_order_acquire) >= e; };
  int first_missing = 0;  // ranks before it have arrived
  auto ready = [&] {
    while (first_missing < world_ && arrived(first_missing)) ++first_missing;
    return first_missing == world_;
  };
  wait_until(target(), ready, ctx, [&] {
    std::vector<int> m;
    for (int r = 0; r < world_; ++r)
      if (!arrived(r)) m.push_back(r);
    return m;
  });
}

uint64_t SegmentTransport::handle_of(const void* p, size_t nbytes) const {
  if (nbytes == 0) return 0;
  if (!arena_->contains(p, nbytes)) return kNotRegistered;
  return static_cast<uint64_t>(static_cast<const std::byte*>(p) - arena_->base());
}

std::unique_ptr<Transport> SegmentTransport::split(const std::vector<int>& ranks, const std::string& id,
                                                   const GroupOptions& opts) {
  auto it = std::find(ranks.begin(), ranks.end(), rank_);
  ARTEL_CHECK(it != ranks.end(), "split: rank ", rank_, " is not in ", rank_list(ranks));
  SegmentConfig cfg = cfg_;
  cfg.name = cfg_.name + "." + id;
  cfg.channel_bytes = opts.message_bytes;
  cfg.arena_bytes = opts.registered_bytes;
  cfg.rank = static_cast<int>(it - ranks.begin());
  cfg.world = static_cast<int>(ranks.size());
  return connect(cfg);
}

}  // namespace artel::comm
