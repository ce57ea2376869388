// Transport: the small interface a communication backend implements. The
// collective algorithms (algorithms.h) are written once over it, so a backend
// is only this file's two classes — the rest of comm/ is shared (after
// gloo's transport/pair.h).
//
// A backend supplies:
//   - Transport: tagged, blocking point-to-point messages between the group's
//     ranks, plus bookkeeping for error messages (which ranks are missing).
//   - optionally SharedMemory: per-rank scratch buffers every rank can read,
//     registered memory and a barrier. Transports that have it (shm, thread)
//     get the direct-read algorithms; others (mpi) use the point-to-point ones.
//
// Threading: a group runs one op at a time (the progress thread, or a caller
// helping it), in the same order on every rank, so a transport is never
// called concurrently and may rely on that order. Every wait must give up at
// ctx.deadline with a TimeoutError (use OpContext::timeout_error), and soon
// after abort() with an Error — never hang.
//
//   class MyTransport : public comm::Transport { ...send/recv/send_recv... };
//   register_backend("my", [](const GroupOptions& o) { return std::make_unique<MyTransport>(o); });
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "artel/core/error.h"
#include "artel/comm/process_group.h"
#include "artel/core/tensor.h"

namespace artel::comm {

using Clock = std::chrono::steady_clock;

// What a transport needs to know about the op it serves: when to give up and
// how to name the op in an error.
struct OpContext {
  std::string op = "op";       // "all_reduce", "recv", ...
  uint64_t seq = 0;            // collective sequence number in the group (0: point-to-point)
  std::string group = "world";
  Clock::time_point deadline = Clock::time_point::max();
  const std::atomic<bool>* aborted = nullptr;  // set when the group is being destroyed
  // The group's numbering of the serving transport's ranks, where it differs
  // (a hierarchy's host: local rank -> group rank), so errors name the
  // group's ranks; nullptr: the same.
  const std::vector<int>* group_ranks = nullptr;
  // The first group's numbering of a subgroup's ranks (new_group), so errors
  // name both: "rank 1 (world rank 3)"; nullptr: not a subgroup.
  const std::vector<int>* world_ranks = nullptr;

  // "all_reduce #12 in group 'world'"
  std::string describe() const;
  bool expired() const { return Clock::now() >= deadline; }
  bool abort_requested() const { return aborted && aborted->load(std::memory_order_relaxed); }
  // Rank `r` of the serving transport, in the group's numbering.
  int group_rank(int r) const { return group_ranks ? (*group_ranks)[static_cast<size_t>(r)] : r; }
  // "rank 1", or in a subgroup "rank 1 (world rank 3)": rank `r` of the serving transport.
  std::string rank_name(int r) const;
  // The error to throw when `deadline` passes while waiting for `missing` ranks.
  TimeoutError timeout_error(const std::vector<int>& missing, const std::string& detail = "") const;
  Error abort_error() const;
};

// Message tags: user tags (>= 0) for send/recv; collectives use their own
// space so they can never match a user's message.
using Tag = uint64_t;
inline Tag user_tag(int tag) { return static_cast<Tag>(static_cast<uint32_t>(tag)); }
inline Tag collective_tag(uint64_t seq, uint32_t step) { return (1ull << 63) | (seq << 20) | (step & 0xfffffu); }

class SharedMemory;
class NativeCollectives;
class Hierarchy;
struct Collective;  // algorithms.h

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Blocking point-to-point. Messages from one rank to another with the same
  // tag arrive in order. A send may block until the matching recv starts, so
  // exchanges use send_recv. recv throws Error if the message's size differs
  // from `nbytes` (so mismatched sizes are always caught).
  virtual void send(int dst, Tag tag, const void* data, size_t nbytes, const OpContext& ctx) = 0;
  virtual void recv(int src, Tag tag, void* data, size_t nbytes, const OpContext& ctx) = 0;
  // Sends to `dst` and receives from `src` at the same time (a ring step).
  virtual void send_recv(int dst, Tag send_tag, const void* send_data, size_t send_bytes, int src, Tag recv_tag,
                         void* recv_data, size_t recv_bytes, const OpContext& ctx) = 0;
  // Sends only if the whole message can be handed over now, without waiting
  // for anyone (it fits in the transport's buffer); otherwise returns false
  // having sent nothing. Lets a caller send on its own thread, no hand-off.
  virtual bool try_send(int /*dst*/, Tag /*tag*/, const void* /*data*/, size_t /*nbytes*/, const OpContext& /*ctx*/) {
    return false;
  }

  // This rank starts collective `seq` (1, 2, ...); lets missing() name the ranks
  // that have not. A transport that cannot tell returns an empty list.
  virtual void enter(uint64_t seq) = 0;
  virtual std::vector<int> missing(uint64_t seq) const = 0;

  // Makes every current and future wait throw soon; called when the group is
  // destroyed so the progress thread can stop.
  virtual void abort() = 0;
  // For a rank that failed while its peers may wait for it in a collective:
  // lets the job end when this process exits. A backend whose peers see a
  // rank leave (shm, thread: "rank 0 left the group") has nothing to do.
  virtual void end_job_on_failure() {}

  // The transport of a subgroup of `ranks` (this transport's numbering, sorted);
  // called by the members only, in the same order on each. `id` is unique per
  // subgroup within the job; `opts` are the subgroup's options (its rank and
  // size already set), for the settings a transport reads at creation.
  virtual std::unique_ptr<Transport> split(const std::vector<int>& ranks, const std::string& id,
                                           const GroupOptions& opts) = 0;

  // Memory the transport moves without copies; plain memory when it has none.
  virtual Tensor alloc(const Shape& shape, DType dtype) = 0;

  // The shared-memory facet, or nullptr.
  virtual SharedMemory* shared() { return nullptr; }
  // The backend library's own collectives (MPI's), or nullptr.
  virtual NativeCollectives* native() { return nullptr; }
  // The group's hosts, when it spans several and one has several ranks; else nullptr.
  virtual Hierarchy* hierarchy() { return nullptr; }
  // Whether the group's ranks are on more than one host.
  virtual bool spans_hosts() const { return false; }
};

// Collectives a backend's library runs itself (MPI_Allreduce, ...): algorithm
// "native", which "auto" picks wherever supports() says yes.
class NativeCollectives {
 public:
  virtual ~NativeCollectives() = default;
  virtual bool supports(const Collective& c) const = 0;
  virtual void run(const Collective& c, const OpContext& ctx) = 0;
};

// A group spread over hosts (hosts.h), one of them with several ranks: this
// rank's host as a transport of its own (shared memory), and the links
// between hosts as a library's collectives over slices, the ranks of one
// local rank, one per host. There are as many slices as the smallest host
// has ranks (g on hosts of g ranks each; 1 on hosts of 2, 1 and 2), and a
// rank of a larger host's higher local ranks is in none. The hierarchical
// algorithm (all_reduce_hierarchical.cpp) keeps on the host everything it can.
class Hierarchy {
 public:
  virtual ~Hierarchy() = default;
  // This host's ranks, numbered by their order in the group.
  virtual Transport& local() = 0;
  // The group rank of each of local()'s ranks (OpContext::group_ranks).
  virtual const std::vector<int>& local_group_ranks() const = 0;
  // How many slices; local ranks 0 .. slices() − 1 are in one each.
  virtual int slices() const = 0;
  // Whether every host has the same number of ranks (so slices() of them).
  virtual bool equal_hosts() const = 0;
  // This rank's slice: the ranks of its local rank on every host. Only for
  // a local rank below slices().
  virtual NativeCollectives& across() = 0;
  // With equal_hosts(), the group rank of local rank `local` on the host that
  // is rank `host` of every slice: where a reduce-scatter's or all-gather's
  // blocks belong.
  virtual int group_rank(int local, int host) const = 0;
  // Whether across() reduces `c`'s dtype and op at its size; the same answer on every rank.
  virtual bool carries(const Collective& c) const = 0;
  // "2 hosts (2,2 ranks)"
  virtual std::string describe() const = 0;
  // Bytes this rank has sent to and received from other hosts so far, in
  // across()'s steps (ProcessGroup::bytes_sent adds them to its messages').
  virtual int64_t bytes_sent_across() const = 0;
  virtual int64_t bytes_received_across() const = 0;
};

// Direct access to the peers' memory (processes sharing a segment, or threads).
//
// Note [Scratch halves]: each rank's scratch is two halves used alternately:
// between sync() e-1 and sync() e a rank writes only its half write_half(),
// and after sync() e its peers may read that half until they enter sync() e+1.
// So one sync per exchange suffices and no algorithm overwrites what a peer
// may still read, across algorithms too. Registered (user) memory has no
// halves: an algorithm that lets peers read it must sync once more at the end.
class SharedMemory {
 public:
  static constexpr size_t kHeaderBytes = 256;  // start of each half: posted words

  virtual ~SharedMemory() = default;
  virtual size_t half_bytes() const = 0;  // data bytes per half (after the header)
  // This rank's half to write in the current interval; peers' halves to read
  // after the next sync() are read_half(r).
  virtual std::byte* write_half() = 0;
  virtual const std::byte* read_half(int rank) const = 0;
  // Posted words (kHeaderBytes / 8 of them), double-buffered like the halves.
  virtual uint64_t* write_words() = 0;
  virtual const uint64_t* read_words(int rank) const = 0;
  // Barrier over the group; flips the halves.
  virtual void sync(const OpContext& ctx) = 0;
  // Registered memory: a handle peers can resolve, or kNotRegistered.
  static constexpr uint64_t kNotRegistered = ~0ull;
  virtual uint64_t handle_of(const void* p, size_t nbytes) const = 0;
  virtual std::byte* resolve(int rank, uint64_t handle) const = 0;
};

}  // namespace artel::comm
