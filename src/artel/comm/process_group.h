// ProcessGroup: the workers of a job (or a subset of them) and every way they
// talk — point-to-point messages and collectives.
//
// Every call is asynchronous: it queues the op on the group's progress thread
// and returns a Work handle at once; ops run in the order they were issued, so
// the caller computes while they progress. Work::wait(timeout) rethrows any
// error from the progress thread. A timeout is an error that names the op, its
// sequence number in the group, the group and the ranks that did not arrive.
// Every rank must issue the group's collectives in the same order; with
// debug checks on, a mismatch (op, size, dtype) names the rank that diverged.
//
//   auto pg = comm::init_process_group({.backend = "shm", .rank = r, .world_size = n, .job_id = id});
//   Tensor g = pg->alloc({1 << 20});                 // registered memory: no copies
//   auto work = pg->all_reduce(g, {.op = comm::ReduceOp::avg});
//   ...compute...
//   work->wait();
//
// Tensors are shared handles: the op reads and writes the caller's storage, which
// must stay alive and untouched until the Work completes. A group is driven by
// one thread at a time (its owner); Work handles may be waited on anywhere.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "artel/core/tensor.h"

namespace artel::comm {

using Duration = std::chrono::milliseconds;

enum class ReduceOp { sum, avg, max, min, prod };
const char* reduce_op_name(ReduceOp op);
ReduceOp parse_reduce_op(const std::string& name);  // throws Error naming the choices

class Progress;

// A handle to one queued op.
class Work {
 public:
  // Blocks until the op is done; rethrows its error. A zero timeout means the
  // group's default; a negative one is an error. If the time runs out first,
  // throws TimeoutError naming the op, its sequence number, the group and the
  // ranks that have not reached it (the op itself goes on).
  void wait(Duration timeout = Duration::zero());
  bool completed() const;
  std::string description() const;  // "all_reduce #3 in group 'world'"

  // For the progress engine (progress.h).
  Work(std::shared_ptr<Progress> progress, std::string op, uint64_t seq);
  void finish(std::exception_ptr error);
  const std::string& op() const { return op_; }
  uint64_t seq() const { return seq_; }

 private:
  std::shared_ptr<Progress> progress_;
  std::string op_;
  uint64_t seq_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> done_{false};
  std::exception_ptr error_;
};
using WorkPtr = std::shared_ptr<Work>;

// One options struct per collective (as c10d's AllreduceOptions), never runs
// of bool parameters. `algorithm` is "auto" or a name from docs/COLLECTIVES.md,
// for benchmarks and tests.
struct AllReduceOptions {
  ReduceOp op = ReduceOp::sum;
  std::string algorithm = "auto";
};
struct BroadcastOptions {
  int root = 0;
  std::string algorithm = "auto";
};
struct ReduceOptions {
  int root = 0;
  ReduceOp op = ReduceOp::sum;
  std::string algorithm = "auto";
};
struct AllGatherOptions {
  std::string algorithm = "auto";
};
struct ReduceScatterOptions {
  ReduceOp op = ReduceOp::sum;
  std::string algorithm = "auto";
};
struct AllToAllOptions {
  std::string algorithm = "auto";
};
struct RootOptions {  // gather, scatter
  int root = 0;
};

struct GroupOptions {
  std::string backend = "shm";  // "shm" (processes on one host), "mpi", or "thread" (ranks as threads, thread_group.h)
  int rank = 0;                 // 0 <= rank < world_size
  int world_size = 1;
  std::string job_id;                           // names the shm segment; one job per id: [A-Za-z0-9._-], <= 100 chars
  Duration timeout = std::chrono::minutes(5);   // default for every Work::wait and the rendezvous; > 0
  bool debug_checks = false;                    // verify op/seq/size/dtype agree across ranks before each collective
  // shm/thread: per rank, the memory alloc() can hand out. Address space
  // only until alloc hands it out (Note [Registered memory is address space
  // first], segment_layout.h), so large enough for a GPT-2's buckets and weights.
  size_t registered_bytes = 8ull << 30;
  size_t staging_bytes = 1ull << 20;            // shm/thread: per rank, each of the two scratch halves; >= 4096
  size_t message_bytes = 128ull << 10;          // shm/thread: per ordered pair of ranks, the buffer of send/recv; >= 64
};

// Settings of a subgroup that differ from its parent's (0: the parent's).
struct NewGroupOptions {
  // A send that fits in the free part of this buffer is copied in at once on
  // the sender's thread and completes without its receiver (see send()); size
  // it to the messages a pipeline keeps in flight.
  size_t message_bytes = 0;
  // How long its ops wait (and its Work::wait's default): a parameter
  // server's worker waits on a bound that a peer's own timeout decides.
  Duration timeout = Duration::zero();
  // Per rank, the memory alloc() can hand out (shm/thread): 0 for a group
  // that only moves its callers' own tensors, whose creator would otherwise
  // back the parent's registered bytes for every member. Empty: the parent's.
  std::optional<size_t> registered_bytes;
};

// Reads ARTEL_RANK, ARTEL_WORLD_SIZE, ARTEL_JOB_ID (set by `artel launch`) into
// `base`; for the program's edge (CLI), never deep inside. Throws Error if a
// variable is missing or malformed.
GroupOptions group_options_from_env(GroupOptions base = {});
// True when ARTEL_RANK and ARTEL_WORLD_SIZE are set (launched as a worker).
bool launched_as_worker();

class Transport;

// /dev/shm had no room for the pages of registered memory (ProcessGroup::alloc):
// a container's default of 64 MiB, say. The memory is still to be had as
// ordinary memory, and the collectives then stage through scratch.
class SharedMemoryFull : public Error {
 public:
  using Error::Error;
};

// One concrete class for every backend: a backend supplies a small transport
// (transport.h) and the collectives are algorithms written once over it.
class ProcessGroup {
 public:
  struct Impl;
  explicit ProcessGroup(std::unique_ptr<Impl> impl);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const;
  int size() const;
  const std::string& name() const;  // e.g. "world" or "world/[0,2]"
  const GroupOptions& options() const;
  // For a rank that failed (its error already said), where the backend's
  // peers would not notice and wait out their timeout: lets the job end as
  // soon as this process exits (mpi: no MPI_Finalize; mpirun then stops the
  // rest). Elsewhere nothing is needed.
  void end_job_on_failure();

  // Point-to-point (tagged, tag >= 0). isend/irecv are these; call ->wait() to block.
  // A send that fits in the transport's buffer while the group has nothing
  // else queued (shm/thread: GroupOptions::message_bytes) is copied out on the
  // calling thread and returns completed: no hand-off to the progress thread,
  // which on a busy machine may wait milliseconds for a core.
  WorkPtr send(const Tensor& t, int dst, int tag = 0);
  WorkPtr recv(Tensor t, int src, int tag = 0);

  // In place: every rank's `t` becomes the reduction over ranks.
  WorkPtr all_reduce(Tensor t, const AllReduceOptions& opts = {});
  // Out of place: `out` (same numel and dtype) receives the result; `in` is untouched.
  WorkPtr all_reduce(const Tensor& in, Tensor out, const AllReduceOptions& opts = {});
  WorkPtr broadcast(Tensor t, const BroadcastOptions& opts = {});
  // The reduction lands in `t` on the root; other ranks' `t` are unspecified after.
  WorkPtr reduce(Tensor t, const ReduceOptions& opts = {});
  // `out` holds size() blocks the size of `in`, in rank order. In place when
  // `in` is this rank's block of `out`.
  WorkPtr all_gather(const Tensor& in, Tensor out, const AllGatherOptions& opts = {});
  // `in` holds size() blocks the size of `out`; rank r gets the reduction of
  // block r. In place when `out` is this rank's block of `in`; the other
  // blocks of `in` are left as they were.
  WorkPtr reduce_scatter(const Tensor& in, Tensor out, const ReduceScatterOptions& opts = {});
  // `in` and `out` hold size() equal blocks; block j of `in` goes to rank j.
  WorkPtr all_to_all(const Tensor& in, Tensor out, const AllToAllOptions& opts = {});
  // `out` (size() blocks) is only written on the root; others may pass an undefined tensor.
  WorkPtr gather(const Tensor& in, Tensor out, const RootOptions& opts = {});
  // `in` (size() blocks) is only read on the root; others may pass an undefined tensor.
  WorkPtr scatter(const Tensor& in, Tensor out, const RootOptions& opts = {});
  WorkPtr barrier();

  // A subgroup of this group's ranks (ranks given in this group's numbering).
  // Every member of the list calls it with the same list, in the same order
  // relative to other new_group calls; a rank not in the list gets nullptr
  // (and need not call). Groups are independent: each has its own progress
  // thread and sequence numbers.
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks, const NewGroupOptions& opts = {});

  // A tensor in memory the backend can move without copies ("registered"
  // memory, e.g. inside the shm segment); plain memory when it has none.
  // Throws Error when the registered memory is used up (GroupOptions::registered_bytes),
  // SharedMemoryFull when the host's /dev/shm has no room for its pages.
  Tensor alloc(const Shape& shape, DType dtype = DType::f32);
  // Bytes of alloc()'s tensors still alive on this group (communication
  // buffers of a memory report).
  int64_t allocated_bytes() const;
  // Bytes this rank's point-to-point messages have carried on this group so
  // far, of collectives' steps and send/recv alike (counted_transport.h:
  // direct-read shared-memory algorithms move data without messages), and
  // what the hierarchical collectives sent between hosts; MPI's own
  // collectives count nothing.
  int64_t bytes_sent() const;
  int64_t bytes_received() const;
  // The algorithm (docs/COLLECTIVES.md's name) of the collective last issued
  // on this group, "none" before the first: what "auto" chose for it, which
  // depends on the op, the size and where the ranks are.
  const char* last_algorithm() const;
  // "2 hosts (2,2 ranks)" when this group spans hosts and one has several
  // ranks, where "auto" runs all-reduces hierarchically; "" otherwise.
  std::string hosts() const;
  // Whether "auto" runs reduce-scatters and all-gathers hierarchically too:
  // hosts() is not "" and every host has as many ranks.
  bool hierarchical_blocks() const;

 private:
  std::unique_ptr<Impl> impl_;
};

// Creates the group for one worker of a job; collective over the world.
std::shared_ptr<ProcessGroup> init_process_group(const GroupOptions& opts);

// Backends register a factory under their name (shm and thread are built in;
// mpi registers itself when linked). Returns true, for static registration:
//   static const bool kRegistered = register_backend("mpi", make_mpi_transport);
using TransportFactory = std::function<std::unique_ptr<Transport>(const GroupOptions&)>;
bool register_backend(const std::string& name, TransportFactory factory);
std::vector<std::string> backend_names();

}  // namespace artel::comm
