// host_map: ranks grouped by hostname, hosts in the order of their lowest
// rank, whatever the counts per host; over a group, every rank learns the same map.
#include "artel/comm/hosts.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include "artel/comm/thread_group.h"
#include "artel/core/error.h"

namespace artel::comm {
namespace {

TEST(Hosts, RanksAreGroupedByHostnameInOrderOfTheirLowestRank) {
  HostMap m = host_map({"b", "a", "b", "c", "a"});
  EXPECT_EQ(m.names, (std::vector<std::string>{"b", "a", "c"}));
  EXPECT_EQ(m.host_of, (std::vector<int>{0, 1, 0, 2, 1}));
  EXPECT_EQ(m.ranks, (std::vector<std::vector<int>>{{0, 2}, {1, 4}, {3}}));
  EXPECT_EQ(m.describe(), "3 hosts (2,2,1 ranks)");
  EXPECT_EQ(host_map({"x", "x"}).describe(), "1 host");
  EXPECT_THROW(host_map({"x", ""}), Error);
}

TEST(Hosts, EveryRankOfAGroupLearnsTheSameMap) {
  char name[256] = {};
  ASSERT_EQ(gethostname(name, sizeof name - 1), 0);
  spawn_threads(3, [&](ProcessGroup& pg) {
    HostMap m = host_map(pg);
    EXPECT_EQ(m.names, std::vector<std::string>{name});
    EXPECT_EQ(m.ranks, (std::vector<std::vector<int>>{{0, 1, 2}}));
  });
}

}  // namespace
}  // namespace artel::comm
