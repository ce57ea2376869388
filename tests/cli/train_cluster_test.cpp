// Training across hosts: W2 data-parallel under mpirun on two "hosts" of two
// ranks each (scripts/cluster.sh: network namespaces joined by a 1 Gbit/s
// bridge, real OpenMPI over TCP between them) takes the step of one worker on
// the same global batch. Skipped where network namespaces are not permitted.
#include "train_runs.h"

namespace {

using namespace artel_test;
using TrainCluster = TrainRuns;

#ifdef ARTEL_MPIEXEC
TEST_F(TrainCluster, W2OnTwoHostsOfTwoRanksEqualsOneWorker) {
  const std::string w2 = "--steps 4 --eval-batches 1 --generate 0 --threads 1 --data-order sequential --seed 3";
  ok(train(w2 + " --batch-size 12" + out("one")));
  const std::string cluster = std::string(ARTEL_SOURCE_DIR) + "/scripts/cluster.sh --ranks 2,2 --rate 1gbit -- ";
  Result r = train(w2 + " --batch-size 3 --backend mpi" + out("hosts"), "", cluster);
  if (r.code == 77) GTEST_SKIP() << r.err;
  ok(r);
  EXPECT_NE(r.err.find("2 hosts (2,2 ranks)"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("x 4 worker(s) = global batch 12"), std::string::npos) << r.out;
  expect_same_run("one", "hosts");
}
#endif

}  // namespace
