// The "mpi" backend's transport: artel's point-to-point messages over MPI, for
// jobs started by mpirun/srun on a cluster. Rank and size come from
// MPI_COMM_WORLD; the collectives either run artel's point-to-point algorithms
// over this transport or, for algorithm "native" (the default), MPI's own
// (mpi_native.h), so one run can compare the two.
//
//   mpirun -np 4 ./prog     with   comm::init_process_group({.backend = "mpi"});
//
// Each group owns three communicators, so nothing can cross between them: one
// for the user's tagged send/recv, one for collective traffic and one only for
// creating subgroups (used by the group's owner thread alone).
//
// Note [Tags on the wire]: artel's 64-bit tags do not fit MPI's (MPI_TAG_UB is
// 2^31 - 1 for OpenMPI, 32767 in the worst case the standard allows). User tags
// go unchanged (checked against MPI_TAG_UB); a collective tag keeps its low
// bits, the step and the sequence number modulo a power of two. Two messages
// whose tags collide that way still match correctly: MPI matches messages from
// one sender with one tag in the order they were sent, and every rank posts
// its receives from a peer in the same order as the peer sends them (ops run in
// issue order, the same on every rank).
//
// Note [Buffered user sends]: ProcessGroup::send completes without waiting for
// the receiver (two ranks may each send before they receive, on one progress
// thread), so a user message is copied and sent from the copy; later calls reap
// the finished copies and the destructor waits for the rest up to the group's
// timeout. Sends inside collectives go from the caller's buffer, as algorithms
// pair them with receives (send_recv).
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "artel/comm/mpi/mpi_env.h"
#include "artel/comm/mpi/mpi_hierarchy.h"
#include "artel/comm/mpi/mpi_native.h"
#include "artel/comm/transport.h"

namespace artel::comm::mpi {

class MpiTransport : public Transport {
 public:
  // The world group: duplicates MPI_COMM_WORLD (initialising MPI). `opts.rank`
  // and `opts.world_size` are taken from MPI; if set to something other than
  // the defaults (0 and 1) they must agree with it.
  static std::unique_ptr<MpiTransport> world(const GroupOptions& opts);
  ~MpiTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void send(int dst, Tag tag, const void* data, size_t nbytes, const OpContext& ctx) override;
  void recv(int src, Tag tag, void* data, size_t nbytes, const OpContext& ctx) override;
  void send_recv(int dst, Tag send_tag, const void* send_data, size_t send_bytes, int src, Tag recv_tag, void* recv_data,
                 size_t recv_bytes, const OpContext& ctx) override;
  // MPI cannot tell cheaply which ranks have reached an op; timeouts name the
  // peers this rank was waiting on instead.
  void enter(uint64_t seq) override {}
  std::vector<int> missing(uint64_t seq) const override { return {}; }
  void abort() override {
    aborted_ = true;
    if (hierarchy_) hierarchy_->local().abort();
  }
  // MPI does not tell a rank's peers that it failed, and its MPI_Finalize
  // waits for them, blocked in their next collective until their timeout.
  // So the rank leaves without it (mark_unclean); mpirun ends a job whose
  // rank exits non-zero (its default) and says which. MPI_Abort ends it too,
  // but garbled mpirun's report now and then (OpenMPI 4.1: "ORTE_ERROR_LOG:
  // Out of resource in file show_help.c").
  void end_job_on_failure() override;
  // Note [Subgroups on one host]: in a job over several hosts, a subgroup
  // whose ranks share a host (a tensor-parallel group, placed as Megatron
  // places them) runs on artel's shared memory instead of MPI.
  std::unique_ptr<Transport> split(const std::vector<int>& ranks, const std::string& id,
                                   const GroupOptions& opts) override;
  Tensor alloc(const Shape& shape, DType dtype) override { return Tensor::empty(shape, dtype); }

  // MPI's own collectives on this group (algorithm "native").
  NativeCollectives* native() override { return &native_; }
  // The world group's hosts (mpi_hierarchy.h), when it spans several with several ranks on one.
  Hierarchy* hierarchy() override { return hierarchy_.get(); }
  bool spans_hosts() const override { return job_spans_hosts_; }

 private:
  struct Pending;   // a request with what it needs to be checked
  struct Buffered;  // Note [Buffered user sends]
  MpiTransport(MPI_Comm members, Duration timeout);

  MPI_Comm comm_for(Tag tag) const { return static_cast<int64_t>(tag) < 0 ? coll_ : p2p_; }
  int wire_tag(Tag tag, const OpContext& ctx) const;  // Note [Tags on the wire]
  // Post the MPI requests of one message (Note [Tags on the wire]); `header`
  // must outlive them (it carries the size of a message of several pieces).
  void post_send(int dst, Tag tag, const void* data, size_t nbytes, const OpContext& ctx, std::vector<Pending>& out,
                 uint64_t* header);
  void post_recv(int src, Tag tag, void* data, size_t nbytes, const OpContext& ctx, std::vector<Pending>& out,
                 uint64_t* header);
  // Polls until every request completes; throws TimeoutError at ctx.deadline
  // (naming the peers still pending), Error after abort() or on a size mismatch.
  void wait_all(std::vector<Pending>& reqs, const OpContext& ctx);
  void reap_buffered();
  void barrier_members(const std::vector<int>& ranks, const OpContext& ctx);

  MPI_Comm p2p_ = MPI_COMM_NULL, coll_ = MPI_COMM_NULL, split_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  int tag_ub_ = 32767;       // largest tag MPI allows here
  int coll_tag_mask_ = 0;    // 2^k - 1 <= tag_ub_
  Duration timeout_;
  bool job_spans_hosts_ = false;  // the world's ranks are on more than one host
  std::atomic<bool> aborted_{false};
  std::deque<Buffered> buffered_;
  MpiNative native_;
  std::unique_ptr<MpiHierarchy> hierarchy_;  // world group only; destroyed first (declared last)
};

}  // namespace artel::comm::mpi
