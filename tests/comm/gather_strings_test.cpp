// gather_strings: strings of different lengths (empty ones, ones not a
// multiple of the 8-byte words, bytes of every value) arrive whole and in
// rank order, at every rank or at the root; one over the limit is refused on
// every rank, naming its rank.
#include "artel/comm/gather_strings.h"

#include <gtest/gtest.h>

#include "artel/comm/thread_group.h"
#include "artel/core/error.h"

namespace artel::comm {
namespace {

// Rank r's string: 5r bytes, every byte value passing through.
std::string text_of(int rank) {
  std::string s;
  for (int i = 0; i < 5 * rank; ++i) s.push_back(static_cast<char>((37 * rank + 11 * i) % 256));
  return s;
}

TEST(GatherStrings, EveryRankOrTheRootGetsEveryRanksStringInRankOrder) {
  spawn_threads(4, [&](ProcessGroup& pg) {
    const std::vector<std::string> all = all_gather_strings(pg, text_of(pg.rank()), {.max_bytes = 64});
    ASSERT_EQ(all.size(), 4u);
    for (int r = 0; r < 4; ++r) EXPECT_EQ(all[static_cast<size_t>(r)], text_of(r)) << "rank " << r;
    const std::vector<std::string> at2 = gather_strings(pg, text_of(pg.rank()), 2, {.max_bytes = 64});
    if (pg.rank() != 2) {
      EXPECT_TRUE(at2.empty());
      return;
    }
    EXPECT_EQ(at2, all);
  });
}

TEST(GatherStrings, AStringOverTheLimitIsRefusedOnEveryRankNamingItsRank) {
  spawn_threads(3, [&](ProcessGroup& pg) {
    try {
      all_gather_strings(pg, text_of(pg.rank()), {.max_bytes = 9, .what = "configuration", .hint = "h"});
      ADD_FAILURE() << "rank " << pg.rank() << " was not refused";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("rank 2's configuration is 10 bytes, outside [0, 9]"), std::string::npos)
          << e.what();
    }
  });
}

}  // namespace
}  // namespace artel::comm
