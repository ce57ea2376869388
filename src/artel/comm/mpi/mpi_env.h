// The process-wide MPI state behind the "mpi" backend: MPI is initialised once
// (MPI_THREAD_MULTIPLE: every group has its own progress thread, and several
// groups may talk at once) on first use and finalised at exit; a watchdog
// turns a blocking MPI call that outlives its deadline into a loud job abort.
//
//   mpi::ensure_initialized();                       // idempotent, thread-safe
//   mpi::check(MPI_Comm_dup(...), "MPI_Comm_dup");   // Error with MPI's message
//   auto guard = mpi::watch(ctx);                    // around a blocking MPI collective
//
// Note [Finalize at exit]: MPI_Finalize runs from an atexit handler registered
// right after MPI_Init, so it runs after the destructors of every group that
// was created later (statics included). It is skipped when an MPI request is
// still pending (a timed-out op left it behind, see mark_unclean): finalising
// with pending requests may block, and mpirun reports a rank that exits without
// MPI_Finalize as a failed job, which is what happened. If MPI was initialised
// by someone else (the program called MPI_Init itself), they finalise it.
#pragma once

// The C API only: the (deprecated) C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <atomic>
#include <string>

#include "artel/comm/transport.h"

namespace artel::comm::mpi {

// Initialises MPI with MPI_THREAD_MULTIPLE unless already initialised; throws
// Error if the library cannot give that thread level or was already finalised.
void ensure_initialized();
// MPI_COMM_WORLD's rank and size (initialises MPI).
int world_rank();
int world_size();

// The text of an MPI error code.
std::string error_string(int rc);
// Throws Error("<what> failed: <MPI's message>") unless rc == MPI_SUCCESS.
void check(int rc, const std::string& what);

// Requests were left pending (a timed-out or aborted op), or this rank failed
// and its peers may be blocked waiting for it (end_job_on_failure): skip
// MPI_Finalize at exit (Note [Finalize at exit]).
void mark_unclean();

// Note [Progress of buffered sends]: a buffered user send (Note [Buffered
// user sends]) larger than MPI's eager limit moves only while the sending
// process calls into MPI: the rendezvous needs it. A rank that sends and then
// waits outside MPI — in the host's shared-memory step of a hierarchical
// collective — leaves its receiver waiting for good (rank 0 gathering the
// weights, the others already in a world all-gather: a deadlock seen on the
// 2-host harness at the end of a tp × pp run). While any such send is in
// flight, a rank waiting on its host's segment drives MPI's progress engine
// (an MPI_Iprobe on MPI_COMM_SELF, through comm::set_wait_progress) at each
// turn of the wait, until MPI is finalised. A thread probing every
// millisecond instead cost a pipeline across hosts 2-3× its step.
void buffered_sends_in_flight(int change);  // +n when posted, -n when done or abandoned

// Note [Blocking native collectives]: MPI's blocking collectives
// (MPI_Allreduce, ...) are what users and peers benchmark, and OpenMPI's
// nonblocking ones (MPI_Iallreduce) are several times slower, so the native
// algorithm calls the blocking ones. They cannot honour a deadline or be
// cancelled, so a watchdog thread checks armed deadlines every 100 ms; one that
// passes prints ctx.timeout_error's message and calls MPI_Abort — the job ends
// with an error naming the op, never hangs (the way PyTorch's NCCL watchdog
// tears a job down). Point-to-point ops poll instead and throw TimeoutError.
// `stuck` says where the call waits, for that message.
class WatchGuard {
 public:
  explicit WatchGuard(const OpContext& ctx, std::string stuck = "stuck inside a blocking MPI collective");
  ~WatchGuard();
  WatchGuard(const WatchGuard&) = delete;
  WatchGuard& operator=(const WatchGuard&) = delete;

 private:
  int slot_;
};

}  // namespace artel::comm::mpi
