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
// must stay alive and untouched until the Work completes.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "artel/core/tensor.h"

namespace artel::comm {

using Duration = std::chrono::milliseconds;

enum class ReduceOp { sum, avg, max, min, prod };
const char* reduce_op_name(ReduceOp op);

// A handle to one queued op.
class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the op is done; rethrows its error. A zero timeout means the
  // group's default; a negative one is an error.
  virtual void wait(Duration timeout = Duration::zero()) = 0;
  virtual bool completed() const = 0;
};
using WorkPtr = std::shared_ptr<Work>;

// One options struct per collective (STYLE 2). `algorithm` is "auto" or a name
// from docs/COLLECTIVES.md, for benchmarks and tests.
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
};
struct AllGatherOptions {
  std::string algorithm = "auto";
};
struct ReduceScatterOptions {
  ReduceOp op = ReduceOp::sum;
  std::string algorithm = "auto";
};
struct RootOptions {  // gather, scatter
  int root = 0;
};

struct GroupOptions {
  std::string backend = "shm";  // "shm" (processes on one host), "mpi", or "thread" (see thread_group.h)
  int rank = 0;
  int world_size = 1;
  std::string job_id;                           // names the shm segment; one job per id
  Duration timeout = std::chrono::minutes(5);   // default for every Work::wait
  bool debug_checks = false;                    // verify op/size/dtype agree across ranks
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

  // Point-to-point (tagged). isend/irecv are these; call ->wait() to block.
  WorkPtr send(const Tensor& t, int dst, int tag = 0);
  WorkPtr recv(Tensor t, int src, int tag = 0);

  // In place: every rank's `t` becomes the reduction over ranks.
  WorkPtr all_reduce(Tensor t, const AllReduceOptions& opts = {});
  // Out of place: `out` (same shape and dtype) receives the result; `in` is untouched.
  WorkPtr all_reduce(const Tensor& in, Tensor out, const AllReduceOptions& opts = {});
  WorkPtr broadcast(Tensor t, const BroadcastOptions& opts = {});
  // The reduction lands in `t` on the root; other ranks' `t` are unspecified after.
  WorkPtr reduce(Tensor t, const ReduceOptions& opts = {});
  // `out` holds size() blocks the size of `in`, in rank order.
  WorkPtr all_gather(const Tensor& in, Tensor out, const AllGatherOptions& opts = {});
  // `in` holds size() blocks the size of `out`; rank r gets the reduction of block r.
  WorkPtr reduce_scatter(const Tensor& in, Tensor out, const ReduceScatterOptions& opts = {});
  // `in` and `out` hold size() equal blocks; block j of `in` goes to rank j.
  WorkPtr all_to_all(const Tensor& in, Tensor out);
  // `out` (size() blocks) is only written on the root; others may pass an undefined tensor.
  WorkPtr gather(const Tensor& in, Tensor out, const RootOptions& opts = {});
  // `in` (size() blocks) is only read on the root.
  WorkPtr scatter(const Tensor& in, Tensor out, const RootOptions& opts = {});
  WorkPtr barrier();

  // A subgroup of this group's ranks (ranks given in this group's numbering).
  // Collective over this group: every member of this group calls it with the
  // same list; ranks not in the list get nullptr.
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks);

  // A tensor in memory the backend can move without copies ("registered"
  // memory, e.g. inside the shm segment); plain memory when it has none.
  Tensor alloc(const Shape& shape, DType dtype = DType::f32);
};

// Creates the group for one worker of a job; collective over the world.
std::shared_ptr<ProcessGroup> init_process_group(const GroupOptions& opts);

}  // namespace artel::comm
