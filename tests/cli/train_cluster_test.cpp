// Training across hosts: W2 data-parallel under mpirun on two "hosts" of two
// ranks each (scripts/cluster.sh: network namespaces joined by a 1 Gbit/s
// bridge, real OpenMPI over TCP between them) takes the step of one worker on
// the same global batch. Skipped where network namespaces are not permitted.
#include "train_runs.h"

namespace {

using namespace artel_test;
using TrainCluster = TrainRuns;

#ifdef ARTEL_MPIEXEC
// "Mpi" in the name: the sanitizer run leaves MPI jobs out (OpenMPI's own leaks).
TEST_F(TrainCluster, MpiW2OnTwoHostsOfTwoRanksEqualsOneWorker) {
  const std::string w2 = "--steps 4 --eval-batches 1 --generate 0 --threads 1 --data-order sequential --seed 3";
  ok(train(w2 + " --batch-size 12" + out("one")));
  const std::string cluster = std::string(ARTEL_SOURCE_DIR) + "/scripts/cluster.sh --ranks 2,2 --rate 1gbit -- ";
  Result r = train(w2 + " --batch-size 3 --backend mpi" + out("hosts"), "", cluster);
  if (r.code == 77) GTEST_SKIP() << r.err;
  ok(r);
  EXPECT_NE(r.err.find("2 hosts (2,2 ranks)"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("x 4 worker(s) = global batch 12"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("; hierarchical over 2 hosts (2,2 ranks)"), std::string::npos) << r.out;
  // W2's 0.8 M weights after 4 AdamW steps, four ranks' gradients summed in another order: 1e-4.
  expect_same_run("one", "hosts", 1e-4);
}

// Hosts of unequal rank counts: the gradients' all-reduce is hierarchical
// with one slice (a leader a host), ZeRO-1's reduce-scatter the ring.
TEST_F(TrainCluster, MpiW2OnThreeHostsOfTwoOneAndTwoRanksEqualsOneWorker) {
  const std::string w2 = "--steps 4 --eval-batches 1 --generate 0 --threads 1 --data-order sequential --seed 3";
  ok(train(w2 + " --batch-size 15" + out("one")));
  const std::string cluster = std::string(ARTEL_SOURCE_DIR) + "/scripts/cluster.sh --ranks 2,1,2 --rate 1gbit -- ";
  for (const char* zero : {"0", "1"}) {
    Result r = train(w2 + " --batch-size 3 --backend mpi --zero " + zero + out(std::string("hosts") + zero), "", cluster);
    if (r.code == 77) GTEST_SKIP() << r.err;
    ok(r);
    EXPECT_NE(r.out.find("x 5 worker(s) = global batch 15"), std::string::npos) << r.out;
    const std::string sync = std::string(zero) == "0" ? "; hierarchical over 3 hosts (2,1,2 ranks)"
                                                      : "; all-reduces hierarchical over 3 hosts (2,1,2 ranks), reduce-scatters ring";
    EXPECT_NE(r.out.find(sync), std::string::npos) << r.out;
    expect_same_run("one", std::string("hosts") + zero, 1e-4);
  }
}

// tp × pp across the hosts, to its end: saving the weights sends each rank's
// shard to rank 0 as buffered sends larger than MPI's eager limit, and the
// senders then wait in the hosts' shared-memory step of the memory report's
// all-gather — outside MPI, which must still move those sends (Note
// [Progress of buffered sends]); without that, rank 0 never arrives.
TEST_F(TrainCluster, MpiTensorTimesPipelineAcrossHostsSavesAndReportsMemory) {
  const std::string cluster = std::string(ARTEL_SOURCE_DIR) + "/scripts/cluster.sh --ranks 2,2 --rate 1gbit -- ";
  Result r = train("--steps 2 --eval-batches 1 --generate 0 --threads 1 --batch-size 12 --tp 2 --pp 2 "
                   "--micro-batches 2 --backend mpi --timeout 120" + out("mesh"), "", cluster);
  if (r.code == 77) GTEST_SKIP() << r.err;
  ok(r);
  EXPECT_NE(r.out.find("memory: peak MiB per worker"), std::string::npos) << r.out;
}
#endif

}  // namespace
