#include "artel/parallel/topology.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "artel/core/error.h"

namespace artel::parallel {

using ::testing::HasSubstr;

using Groups = std::vector<std::vector<int>>;

TEST(Topology, EightRanksTwoByTwoByTwoInMegatronOrder) {
  Topology topo(8, 2, 2, 2);
  EXPECT_EQ(topo.coord_of(0), (Coord{0, 0, 0}));
  EXPECT_EQ(topo.coord_of(1), (Coord{0, 0, 1}));
  EXPECT_EQ(topo.coord_of(2), (Coord{0, 1, 0}));
  EXPECT_EQ(topo.coord_of(5), (Coord{1, 0, 1}));
  EXPECT_EQ(topo.coord_of(7), (Coord{1, 1, 1}));
  EXPECT_EQ(topo.group_ranks(Axis::tp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(topo.group_ranks(Axis::pp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(topo.group_ranks(Axis::dp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(topo.group_of(5, Axis::tp), (std::vector<int>{4, 5}));
  EXPECT_EQ(topo.group_of(5, Axis::pp), (std::vector<int>{5, 7}));
  EXPECT_EQ(topo.group_of(5, Axis::dp), (std::vector<int>{1, 5}));
}

TEST(Topology, RoundTripAndGroupsPartitionTheWorld) {
  const int shapes[][3] = {{1, 1, 1}, {4, 1, 1}, {1, 4, 1}, {1, 1, 4}, {2, 3, 2}, {3, 2, 4}, {2, 2, 2}};
  for (const auto& d : shapes) {
    const int world = d[0] * d[1] * d[2];
    Topology topo(world, d[0], d[1], d[2]);
    EXPECT_EQ(topo.world(), world);
    for (int r = 0; r < world; ++r) EXPECT_EQ(topo.rank_of(topo.coord_of(r)), r);
    for (Axis axis : {Axis::dp, Axis::pp, Axis::tp}) {
      SCOPED_TRACE(std::string(axis_name(axis)) + " of " + std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" +
                   std::to_string(d[2]));
      auto groups = topo.group_ranks(axis);
      EXPECT_EQ(static_cast<int>(groups.size()), world / topo.degree(axis));
      std::vector<int> seen(static_cast<size_t>(world), 0);
      for (const auto& g : groups) {
        ASSERT_EQ(static_cast<int>(g.size()), topo.degree(axis));
        for (size_t i = 0; i < g.size(); ++i) {
          ++seen[static_cast<size_t>(g[i])];
          EXPECT_EQ(topo.group_of(g[i], axis), g);  // each member sees the same group
          Coord c = topo.coord_of(g[i]), first = topo.coord_of(g[0]);
          // members differ only along `axis`, and sit at their coordinate
          EXPECT_TRUE(axis == Axis::dp || c.dp == first.dp);
          EXPECT_TRUE(axis == Axis::pp || c.pp == first.pp);
          EXPECT_TRUE(axis == Axis::tp || c.tp == first.tp);
          EXPECT_EQ(static_cast<int>(i), axis == Axis::dp ? c.dp : axis == Axis::pp ? c.pp : c.tp);
        }
      }
      EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
    }
  }
}

TEST(Topology, TensorParallelGroupsAreAdjacentRanks) {
  Topology topo(12, 1, 3, 4);
  for (const auto& g : topo.group_ranks(Axis::tp)) {
    for (size_t i = 1; i < g.size(); ++i) EXPECT_EQ(g[i], g[i - 1] + 1);
  }
}

TEST(Topology, ForWorldGivesDataParallelTheRest) {
  Topology topo = Topology::for_world(12, 3, 2);
  EXPECT_EQ(topo.degree(Axis::dp), 2);
  EXPECT_EQ(topo.degree(Axis::pp), 3);
  EXPECT_EQ(topo.degree(Axis::tp), 2);
}

TEST(Topology, BadLayoutsSayHowToFix) {
  try {
    Topology(8, 2, 2, 3);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("dp 2 x pp 2 x tp 3 = 12 does not match the world size 8"));
    EXPECT_THAT(e.what(), HasSubstr("hint"));
  }
  EXPECT_THROW(Topology(4, 0, 2, 2), Error);
  EXPECT_THROW(Topology(0, 1, 1, 1), Error);
  EXPECT_THROW(Topology(4, 4, 1, -1), Error);
  try {
    Topology::for_world(8, 3, 1);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("does not divide the world size 8"));
  }
  Topology topo(4, 2, 1, 2);
  EXPECT_THROW(topo.coord_of(4), Error);
  EXPECT_THROW(topo.rank_of(Coord{0, 1, 0}), Error);
}

}  // namespace artel::parallel
