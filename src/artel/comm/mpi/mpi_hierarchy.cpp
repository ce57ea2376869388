#include "artel/comm/mpi/mpi_hierarchy.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "artel/comm/backends.h"

namespace artel::comm::mpi {

std::unique_ptr<Transport> shared_memory_transport(MPI_Comm host, const std::string& name, GroupOptions opts) {
  int rank = 0, size = 1;
  MPI_Comm_rank(host, &rank);
  MPI_Comm_size(host, &size);
  // Unique among jobs (pid and clock) and within this one (its world rank).
  char job[64] = {};
  if (rank == 0) {
    int world_rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    std::snprintf(job, sizeof job, "mpi%d-%lld-r%d-", static_cast<int>(getpid()),
                  static_cast<long long>(std::chrono::steady_clock::now().time_since_epoch().count() % 1000000007),
                  world_rank);
  }
  check(MPI_Bcast(job, sizeof job, MPI_CHAR, 0, host), "MPI_Bcast (shared-memory segment name)");
  opts.backend = "shm";
  opts.rank = rank;
  opts.world_size = size;
  opts.job_id = std::string(job) + name;
  return make_shm_transport(opts);
}

std::unique_ptr<MpiHierarchy> MpiHierarchy::of_world(MPI_Comm world, const GroupOptions& opts) {
  int rank = 0, size = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  MPI_Comm host = MPI_COMM_NULL;
  check(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host), "MPI_Comm_split_type");
  int local_rank = 0, local_size = 1;
  MPI_Comm_rank(host, &local_rank);
  MPI_Comm_size(host, &local_size);
  // Every rank learns each host's rank count, hosts in the order of their leaders' ranks.
  std::vector<int> counts(static_cast<size_t>(size));
  const int mine = local_rank == 0 ? local_size : 0;
  check(MPI_Allgather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, world), "MPI_Allgather (hosts)");
  std::vector<int> per_host;
  for (int c : counts)
    if (c > 0) per_host.push_back(c);
  if (per_host.size() < 2 || std::ranges::max(per_host) < 2) {
    MPI_Comm_free(&host);
    return nullptr;
  }
  std::unique_ptr<MpiHierarchy> h(new MpiHierarchy());
  h->hosts_ = static_cast<int>(per_host.size());
  h->slices_ = std::ranges::min(per_host);
  h->equal_hosts_ = std::ranges::max(per_host) == h->slices_;
  h->describe_ = std::to_string(per_host.size()) + " hosts (";
  for (size_t i = 0; i < per_host.size(); ++i) {
    if (i) h->describe_ += ',';
    h->describe_ += std::to_string(per_host[i]);
  }
  h->describe_ += " ranks)";

  // The host's shared-memory group.
  GroupOptions local = opts;
  local.registered_bytes = 1 << 20;  // the hierarchical steps move the caller's memory, not registered buffers
  h->local_ = shared_memory_transport(host, "h", local);
  h->local_group_ranks_.resize(static_cast<size_t>(local_size));
  check(MPI_Allgather(&rank, 1, MPI_INT, h->local_group_ranks_.data(), 1, MPI_INT, host), "MPI_Allgather (host's ranks)");
  MPI_Comm_free(&host);

  // A slice for each of the first slices_ local ranks; the others are in none.
  const bool in_slice = local_rank < h->slices_;
  check(MPI_Comm_split(world, in_slice ? local_rank : MPI_UNDEFINED, rank, &h->across_comm_),
        "MPI_Comm_split (across hosts)");
  if (in_slice) MPI_Comm_set_errhandler(h->across_comm_, MPI_ERRORS_RETURN);
  h->across_.emplace(h->across_comm_);
  if (!h->equal_hosts_) return h;
  // Who is where: every rank's (local rank, rank in its slice), gathered.
  int host_of_mine = 0;
  MPI_Comm_rank(h->across_comm_, &host_of_mine);
  const int place[2] = {local_rank, host_of_mine};
  std::vector<int> places(2 * static_cast<size_t>(size));
  check(MPI_Allgather(place, 2, MPI_INT, places.data(), 2, MPI_INT, world), "MPI_Allgather (ranks' places)");
  h->group_rank_.assign(static_cast<size_t>(size), -1);
  for (int r = 0; r < size; ++r)
    h->group_rank_[static_cast<size_t>(places[2 * r] * h->hosts_ + places[2 * r + 1])] = r;
  return h;
}

MpiHierarchy::~MpiHierarchy() {
  local_.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && across_comm_ != MPI_COMM_NULL) MPI_Comm_free(&across_comm_);
}

bool MpiHierarchy::carries(const Collective& c) const { return across_->supports(c); }

}  // namespace artel::comm::mpi
