#include "artel/parallel/ps_shard_plan.h"

#include <gtest/gtest.h>

#include "artel/core/error.h"

namespace artel::parallel {
namespace {

TEST(PsShardPlan, SplitsLargeTensorsOverEveryServerAndPlacesSmallOnesWhole) {
  auto plan = plan_ps_shards({{"wte", 3'000'001}, {"ln.w", 64}, {"fc.w", 4096}}, 2);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].name, "wte");  // the model's order is kept
  ASSERT_EQ(plan[0].parts.size(), 2u);
  EXPECT_EQ(plan[0].parts[0].server, 0);
  EXPECT_EQ(plan[0].parts[0].begin, 0);
  EXPECT_EQ(plan[0].parts[0].end, 1'500'000);
  EXPECT_EQ(plan[0].parts[1].server, 1);
  EXPECT_EQ(plan[0].parts[1].end, 3'000'001);
  // Largest small one first onto the least loaded server (server 0 holds one element less).
  ASSERT_EQ(plan[2].parts.size(), 1u);
  EXPECT_EQ(plan[2].parts[0].server, 0);
  EXPECT_EQ(plan[2].parts[0].end, 4096);
  EXPECT_EQ(plan[1].parts[0].server, 1);
}

TEST(PsShardPlan, CoversEveryElementOnceAndBalancesTheServers) {
  std::vector<std::pair<std::string, int64_t>> params;
  for (int i = 0; i < 40; ++i) params.emplace_back(std::string("p").append(std::to_string(i)), 1000 + 37 * i);
  params.emplace_back("big", 2'500'000);
  for (int servers : {1, 2, 3, 5}) {
    auto plan = plan_ps_shards(params, servers);
    for (size_t i = 0; i < plan.size(); ++i) {
      int64_t at = 0;
      for (const PsPart& part : plan[i].parts) {
        EXPECT_EQ(part.begin, at) << plan[i].name;
        EXPECT_GE(part.server, 0);
        EXPECT_LT(part.server, servers);
        at = part.end;
      }
      EXPECT_EQ(at, params[i].second) << plan[i].name;
    }
    auto elements = ps_server_elements(plan, servers);
    const auto [lo, hi] = std::minmax_element(elements.begin(), elements.end());
    EXPECT_LE(*hi - *lo, 1000 + 37 * 39) << servers << " servers: within one small tensor";
  }
}

TEST(PsShardPlan, RefusesNonsense) {
  EXPECT_THROW(plan_ps_shards({{"a", 4}}, 0), Error);
  EXPECT_THROW(plan_ps_shards({{"a", -1}}, 2), Error);
  EXPECT_THROW(plan_ps_shards({{"a", 4}, {"a", 5}}, 2), Error);
}

}  // namespace
}  // namespace artel::parallel
