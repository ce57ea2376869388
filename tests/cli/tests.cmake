# `artel train --backend mpi` under mpirun in the data-parallel equivalence
# test (tests/cli/train_parallel_test.cpp), when this build has the MPI backend.
if(TARGET artel_comm_mpi AND MPIEXEC_EXECUTABLE)
  target_compile_definitions(artel_cli_tests PRIVATE ARTEL_MPIEXEC="${MPIEXEC_EXECUTABLE}")
endif()
