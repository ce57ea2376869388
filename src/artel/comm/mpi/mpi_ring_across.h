// The links between hosts in the hierarchical collectives (mpi_hierarchy.h):
// rings over the ranks of one local rank, one per host — reduce-scatter and
// all-gather of H − 1 steps each, and all-reduce as the two — whose every
// message goes as pieces of at most 1 MiB, all posted at once, and waited
// for inside MPI.
//
// Why not MPI_Allreduce: OpenMPI's tcp transport moves one large message in
// each direction at about half the link's rate (two hosts, 1 Gbit/s: 64 MiB
// each way at 65 MB/s); the same bytes as 1 MiB pieces cross at 119 MB/s,
// 95% of the link (docs/COLLECTIVES.md). Cost: (H − 1)/H of the data leaves
// each rank per half (reduce-scatter, all-gather), the bound over H hosts.
//
// The reduction is artel's (comm/reduce.h), so bf16 sums in f32 at each hop
// as everywhere else; MPI only moves bytes. Blocking, under the watchdog of
// Note [Blocking native collectives] (mpi_env.h), as MPI's own collectives.
//
//   MpiRingAcross across(comm);
//   across.run(all_reduce_collective, ctx);
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "artel/comm/algorithms.h"
#include "artel/comm/mpi/mpi_env.h"

namespace artel::comm::mpi {

class MpiRingAcross : public NativeCollectives {
 public:
  explicit MpiRingAcross(MPI_Comm comm = MPI_COMM_NULL);
  // An all-reduce or reduce-scatter of any dtype by sum, max, min or prod
  // (avg: the caller sums and divides once, as the hierarchical algorithms
  // do), or an all-gather.
  bool supports(const Collective& c) const override;
  void run(const Collective& c, const OpContext& ctx) override;
  // Bytes this rank has sent and received so far (read from any thread).
  int64_t bytes_sent() const { return sent_.load(std::memory_order_relaxed); }
  int64_t bytes_received() const { return received_.load(std::memory_order_relaxed); }

 private:
  // The ring's halves over `buf`, cut into size_ equal-as-can-be blocks.
  // Reduce-scatter completes block rank + shift here (the others hold partial
  // sums); all-gather starts from block rank + shift here and ends with every block.
  void reduce_scatter(std::byte* buf, size_t n, const Collective& c, int shift, const OpContext& ctx);
  void all_gather(std::byte* buf, size_t n, size_t elem_bytes, int shift, const OpContext& ctx);
  // Sends `send` to the next rank while receiving `recv` from the previous one, as pieces.
  void exchange(const std::byte* send, size_t send_bytes, std::byte* recv, size_t recv_bytes, const OpContext& ctx);

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::string stuck_;  // where a timed-out ring waits (WatchGuard)
  std::vector<std::byte> incoming_;  // a received block, before it is reduced into the result
  std::vector<std::byte> work_;      // a reduce-scatter's input, reduced in place
  std::vector<MPI_Request> requests_;
  std::atomic<int64_t> sent_{0}, received_{0};
};

}  // namespace artel::comm::mpi
