#!/bin/bash
# Under mpirun -np 2, rank 1 starts MPI but never calls init_process_group:
# rank 0 must time out after its 1 s with a line that says so, and the job
# must end with an error instead of hanging.
# Usage: init_timeout.sh MPIEXEC MPI_SUITE
out=$("$1" --allow-run-as-root --oversubscribe -np 2 "$2" --one-rank-never-joins 2>&1)
rc=$?
echo "$out"
[ "$rc" != 0 ] || { echo "the job ended well; expected a timeout"; exit 1; }
echo "$out" | grep -q "^rank 0: init_process_group (mpi) .*timed out: .*not every rank of MPI_COMM_WORLD called init_process_group" ||
  { echo "rank 0 did not say that a rank never called init_process_group"; exit 1; }
