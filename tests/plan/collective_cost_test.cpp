// Collective costs against the alpha-beta formulas of collective_cost.h.
#include "artel/plan/collective_cost.h"

#include <gtest/gtest.h>

#include <cmath>

#include "artel/comm/algorithms.h"
#include "test_cluster.h"

namespace artel::plan {
namespace {

using testing::test_cluster;

TEST(CollectiveCost, RingInsideOneHost) {
  const Cluster c = test_cluster();
  const GroupPlacement g = place_group(c, 4, 1);
  EXPECT_EQ(g.hosts, 1);
  const double S = 1e8, n = 4;
  EXPECT_DOUBLE_EQ(all_reduce_seconds(c, g, S), 2 * (n - 1) * 1e-6 + 2 * (n - 1) / n * S / 1e10);
  EXPECT_DOUBLE_EQ(reduce_scatter_seconds(c, g, S), (n - 1) * 1e-6 + (n - 1) / n * S / 1e10);
  EXPECT_DOUBLE_EQ(all_gather_seconds(c, g, S), reduce_scatter_seconds(c, g, S));
  EXPECT_DOUBLE_EQ(all_reduce_seconds(c, place_group(c, 1, 1), S), 0.0);
}

TEST(CollectiveCost, RingAcrossHostsRunsAtTheSlowestLink) {
  const Cluster c = test_cluster();
  // All 8 workers: 4 a host, 4 rings side by side through 4 workers' network shares.
  const GroupPlacement all = place_group(c, 8, 1);
  EXPECT_EQ(all.per_host, 4);
  EXPECT_EQ(all.hosts, 2);
  const double S = 1e8, n = 8;
  EXPECT_DOUBLE_EQ(all_reduce_seconds(c, all, S), 2 * (n - 1) * 1e-5 + 2 * (n - 1) / n * S / std::min(1e10, 4 * 1e9));
  // A group of 2 strided by 4 (a dp group over tp·pp = 4): one member a host.
  const GroupPlacement dp = place_group(c, 2, 4);
  EXPECT_EQ(dp.per_host, 1);
  EXPECT_DOUBLE_EQ(all_reduce_seconds(c, dp, S), 2 * 1e-5 + S / 1e9);
}

TEST(CollectiveCost, OwnNetworkShareRunsAtOneWorkersShare) {
  const Cluster c = test_cluster();
  // ZeRO-3's route: 8 workers over 2 hosts, each worker's traffic through its own 1 GB/s share.
  const GroupPlacement flat = place_group(c, 8, 1, Route::own_network_share);
  const double S = 1e8, n = 8;
  EXPECT_DOUBLE_EQ(all_gather_seconds(c, flat, S), (n - 1) * 1e-5 + (n - 1) / n * S / 1e9);
  // Inside one host the route changes nothing.
  EXPECT_DOUBLE_EQ(all_gather_seconds(c, place_group(c, 4, 1, Route::own_network_share), S),
                   all_gather_seconds(c, place_group(c, 4, 1), S));
}

TEST(CollectiveCost, HierarchicalGoesInsideTheHostThenAcrossOnAWorkersShareOfTheBytes) {
  const Cluster c = test_cluster();
  // 8 workers, 4 a host: a ring of 4 inside each host over a chunk of C
  // bytes, then 4 rings of 2 across the hosts side by side, each over C/4 at
  // one worker's 1 GB/s.
  const GroupPlacement g = place_group(c, 8, 1, Route::hierarchical);
  auto inside = [](double C) { return 3 * 1e-6 + 3.0 / 4 * C / 1e10; };
  auto across = [](double C) { return 1 * 1e-5 + 1.0 / 2 * (C / 4) / 1e9; };
  // One chunk: the steps one after another.
  const double one = 1e6;
  EXPECT_DOUBLE_EQ(reduce_scatter_seconds(c, g, one), inside(one) + across(one));
  EXPECT_DOUBLE_EQ(all_gather_seconds(c, g, one), across(one) + inside(one));
  EXPECT_DOUBLE_EQ(all_reduce_seconds(c, g, one), 2 * inside(one) + 2 * across(one));
  // The reduce-scatter and all-gather one piece after another; the
  // all-reduce in chunks (Note [Pipelined hierarchical all-reduce]), a
  // chunk's passes inside the host under another's across, here the longer:
  // only the first chunk's and the last one's show.
  const double S = 1e8;
  EXPECT_DOUBLE_EQ(reduce_scatter_seconds(c, g, S), inside(S) + across(S));
  EXPECT_DOUBLE_EQ(all_gather_seconds(c, g, S), across(S) + inside(S));
  const double chunks = std::ceil(S / static_cast<double>(comm::kHierarchicalChunkBytes)), chunk = S / chunks;
  EXPECT_NEAR(all_reduce_seconds(c, g, S), 2 * inside(chunk) + chunks * 2 * across(chunk), 1e-12);
  EXPECT_LT(all_reduce_seconds(c, g, S), 2 * inside(S) + 2 * across(S));
  // Less across the hosts than the side-by-side rings here, which pass 7/8 of S twice at 4 GB/s.
  EXPECT_LT(all_reduce_seconds(c, g, S), all_reduce_seconds(c, place_group(c, 8, 1), S));
  // One member a host, or one host: the plain ring.
  EXPECT_DOUBLE_EQ(all_reduce_seconds(c, place_group(c, 2, 4, Route::hierarchical), S),
                   all_reduce_seconds(c, place_group(c, 2, 4), S));
  EXPECT_DOUBLE_EQ(all_reduce_seconds(c, place_group(c, 4, 1, Route::hierarchical), S),
                   all_reduce_seconds(c, place_group(c, 4, 1), S));
}

// Note [A collective's copies]: the bytes a worker's own copies read and write.
TEST(CollectiveCost, ACollectivesCopiesStageInsideAHostAndCrossSocketsBetweenHosts) {
  const Cluster c = test_cluster();
  const double S = 1e8;
  // One host of 4: a plain buffer staged through the segment (in, then the whole out);
  // a reduce-scatter's registered input summed in place.
  const GroupPlacement host = place_group(c, 4, 1);
  EXPECT_DOUBLE_EQ(all_gather_copy_bytes(host, S), 2 * S);
  EXPECT_DOUBLE_EQ(reduce_scatter_copy_bytes(host, S, /*registered=*/true), S + S / 4);
  EXPECT_DOUBLE_EQ(reduce_scatter_copy_bytes(host, S, /*registered=*/false), 2 * S + S + S / 4);
  // 2 hosts of 4, artel's hierarchy: staged (never registered), reordered by
  // slice, and S/4 a worker across sockets, half of it sent and half received.
  const GroupPlacement hier = place_group(c, 8, 1, Route::hierarchical);
  const double sockets = 4 * 0.5 * S / 4;
  EXPECT_DOUBLE_EQ(all_gather_copy_bytes(hier, S), 2 * S + 2 * S + sockets);
  EXPECT_DOUBLE_EQ(reduce_scatter_copy_bytes(hier, S, /*registered=*/true), 2 * S + S + S / 4 + 2 * S + sockets);
  // One member a host: a ring over MPI, only sockets (and a reduce-scatter's sums).
  const GroupPlacement ring = place_group(c, 2, 4, Route::hierarchical);
  EXPECT_DOUBLE_EQ(all_gather_copy_bytes(ring, S), 4 * 0.5 * S);
  EXPECT_DOUBLE_EQ(reduce_scatter_copy_bytes(ring, S, true), 4 * 0.5 * S + 2 * 0.5 * S);
  EXPECT_DOUBLE_EQ(all_gather_copy_bytes(place_group(c, 1, 1), S), 0);
  // All-reduce: inside a host a reduce-scatter then an all-gather; across
  // hosts, the two staged, and twice the sockets on S/4 between them; a
  // ring: every socket byte twice.
  EXPECT_DOUBLE_EQ(all_reduce_copy_bytes(host, S, true), S + S / 4 + 2 * S);
  EXPECT_DOUBLE_EQ(all_reduce_copy_bytes(hier, S, true), (2 * S + S + S / 4 + 2 * S) + 2 * sockets);
  EXPECT_DOUBLE_EQ(all_reduce_copy_bytes(ring, S, true), 2 * 4 * 0.5 * S + 2 * 0.5 * S);
}

TEST(CollectiveCost, SendIsAlphaPlusBytesOverBeta) {
  const Cluster c = test_cluster();
  EXPECT_DOUBLE_EQ(send_seconds(c, false, 1e6), 1e-6 + 1e6 / 1e10);
  EXPECT_DOUBLE_EQ(send_seconds(c, true, 1e6), 1e-5 + 1e6 / 1e9);
}

}  // namespace
}  // namespace artel::plan
