// The hosts of an MPI job as transport.h's Hierarchy: the ranks that share a
// host (MPI_Comm_split_type, MPI_COMM_TYPE_SHARED) talk through artel's
// shared-memory transport, and the links between hosts carry a ring of
// 1 MiB pieces over one communicator per slice (the ranks of one local rank,
// as many slices as the smallest host has ranks; mpi_ring_across.h).
// Built once, for the world group.
//
//   auto h = MpiHierarchy::of_world(comm, opts);   // nullptr: one host, or one rank on each
//   h->local().size();                             // ranks on my host
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "artel/comm/mpi/mpi_ring_across.h"
#include "artel/comm/transport.h"

namespace artel::comm::mpi {

// A shared-memory transport for the ranks of `host`, which all share one
// host, ranked as in `host`; its segment is named for the job (rank 0 of
// `host`: its pid, clock and world rank) and `name`. Collective over `host`. `opts` gives the
// timeout and the sizes the shm backend reads.
std::unique_ptr<Transport> shared_memory_transport(MPI_Comm host, const std::string& name, GroupOptions opts);

class MpiHierarchy : public Hierarchy {
 public:
  // Collective over `world` (every rank calls it). nullptr when the job has
  // a single host or a single rank on every host (nothing to keep local):
  // the flat algorithms run.
  static std::unique_ptr<MpiHierarchy> of_world(MPI_Comm world, const GroupOptions& opts);
  ~MpiHierarchy() override;
  MpiHierarchy(const MpiHierarchy&) = delete;
  MpiHierarchy& operator=(const MpiHierarchy&) = delete;

  Transport& local() override { return *local_; }
  const std::vector<int>& local_group_ranks() const override { return local_group_ranks_; }
  int slices() const override { return slices_; }
  bool equal_hosts() const override { return equal_hosts_; }
  NativeCollectives& across() override { return *across_; }
  bool carries(const Collective& c) const override;
  int group_rank(int local, int host) const override { return group_rank_[static_cast<size_t>(local * hosts_ + host)]; }
  std::string describe() const override { return describe_; }
  int64_t bytes_sent_across() const override { return across_->bytes_sent(); }
  int64_t bytes_received_across() const override { return across_->bytes_received(); }

 private:
  MpiHierarchy() = default;
  std::unique_ptr<Transport> local_;
  std::vector<int> local_group_ranks_;
  MPI_Comm across_comm_ = MPI_COMM_NULL;
  std::optional<MpiRingAcross> across_;  // over across_comm_, once it exists (MPI_COMM_NULL outside every slice)
  int hosts_ = 0, slices_ = 0;
  bool equal_hosts_ = false;
  std::vector<int> group_rank_;  // with equal hosts: [local rank · hosts + rank in the slice]
  std::string describe_;
};

}  // namespace artel::comm::mpi
