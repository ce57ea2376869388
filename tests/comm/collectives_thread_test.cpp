// The collective suite (collective_suite.h) with ranks as threads: every world
// size 1..8, every op, dtype, reduce op and algorithm, on plain and registered
// memory, with tiny scratch halves so the chunked paths run too.
#include <gtest/gtest.h>

#include "artel/comm/thread_group.h"
#include "collective_suite.h"

namespace artel::comm {
namespace {

GroupOptions small_options() {
  GroupOptions o;
  o.timeout = std::chrono::seconds(60);
  o.registered_bytes = 4 << 20;
  o.staging_bytes = 4096;  // 4099 f64 elements need 9+ chunks
  return o;
}

class CollectiveSuite : public ::testing::TestWithParam<int> {};

TEST_P(CollectiveSuite, EveryOpDtypeAlgorithmAndSize) {
  spawn_threads(GetParam(), [](ProcessGroup& pg) { testing::run_collective_suite(pg); }, small_options());
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CollectiveSuite, ::testing::Range(1, 9));

TEST(CollectiveSuite, LargeStagingAndDebugChecks) {
  GroupOptions o = small_options();
  o.staging_bytes = 1 << 20;
  o.debug_checks = true;
  testing::SuiteOptions so;
  so.sizes = {3, (1 << 17) + 3};  // more than one 1 MiB half
  so.sizes_per_case = 2;
  so.dtypes = {DType::f32, DType::bf16};
  so.ops = {ReduceOp::sum, ReduceOp::max};
  spawn_threads(3, [&](ProcessGroup& pg) { testing::check_all_reduce(pg, so); }, o);
}

}  // namespace
}  // namespace artel::comm
