// MPI's own collectives on a group (algorithm "native" of the mpi backend):
// MPI_Allreduce, MPI_Bcast, MPI_Reduce, MPI_Allgather, MPI_Reduce_scatter_block,
// MPI_Alltoall, MPI_Gather, MPI_Scatter and MPI_Barrier, so that
// `artel bench comm --backend mpi` measures the MPI library itself and the mpi
// backend gets the library's tuned algorithms (which know the network) by default.
//
//   MpiNative native(comm);
//   if (native.supports(c)) native.run(c, ctx);   // else: artel's algorithms
//
// Cost: whatever the MPI library picks (OpenMPI's coll/tuned: recursive
// doubling for small all-reduces, ring / Rabenseifner for large ones).
// avg is MPI_SUM then a division (integers truncate, like artel's). bf16
// reductions are not supported — MPI has no bf16 — and fall back to artel's
// algorithms, which accumulate in f32; bf16 data movement (broadcast, gathers)
// is supported as bytes. Blocking calls: Note [Blocking native collectives].
#pragma once

#include "artel/comm/algorithms.h"
#include "artel/comm/mpi/mpi_env.h"

namespace artel::comm::mpi {

class MpiNative : public NativeCollectives {
 public:
  explicit MpiNative(MPI_Comm comm = MPI_COMM_NULL);
  // Whether MPI can run `c`: its dtype and reduce op map onto MPI's and its
  // counts fit MPI's int.
  bool supports(const Collective& c) const override;
  // Runs `c`; throws Error if MPI reports one. Call only if supports(c).
  void run(const Collective& c, const OpContext& ctx) override;

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
};

}  // namespace artel::comm::mpi
