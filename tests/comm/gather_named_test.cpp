// gather_named: lists of different lengths, names, shapes and dtypes from
// every rank arrive whole and in rank order at the root.
#include "artel/comm/gather_named.h"

#include <gtest/gtest.h>

#include "artel/comm/thread_group.h"

namespace artel::comm {
namespace {

// "r<rank>.t<i>", built by appending (GCC 12 warns falsely on `"r" + to_string(...) + ...`).
std::string name_of(int rank, int i) {
  std::string n = "r";
  n += std::to_string(rank);
  n += ".t";
  n += std::to_string(i);
  return n;
}

TEST(GatherNamed, RootGetsEveryRanksListInRankOrder) {
  for (int root : {0, 2}) {
    spawn_threads(3, [&](ProcessGroup& pg) {
      NamedTensors mine;
      for (int i = 0; i <= pg.rank(); ++i) {
        Tensor t = Tensor::full({i + 1, 2}, static_cast<float>(10 * pg.rank() + i));
        mine.emplace_back(name_of(pg.rank(), i), t);
      }
      Tensor count = Tensor::empty({}, DType::i64);
      count.data<int64_t>()[0] = pg.rank();
      mine.emplace_back("count", count);
      mine.emplace_back("empty", Tensor::empty({0}));
      std::vector<NamedTensors> all = gather_named(pg, mine, root);
      if (pg.rank() != root) {
        EXPECT_TRUE(all.empty());
        return;
      }
      ASSERT_EQ(all.size(), 3u);
      for (int r = 0; r < 3; ++r) {
        const NamedTensors& list = all[static_cast<size_t>(r)];
        ASSERT_EQ(list.size(), static_cast<size_t>(r + 3));
        for (int i = 0; i <= r; ++i) {
          EXPECT_EQ(list[static_cast<size_t>(i)].first, name_of(r, i));
          EXPECT_EQ(list[static_cast<size_t>(i)].second.shape(), (Shape{i + 1, 2}));
          EXPECT_EQ(list[static_cast<size_t>(i)].second.to_vector()[0], static_cast<float>(10 * r + i));
        }
        const Tensor& c = list[static_cast<size_t>(r + 1)].second;
        EXPECT_EQ(c.dtype(), DType::i64);
        EXPECT_EQ(c.dim(), 0);
        EXPECT_EQ(c.data<int64_t>()[0], r);
        EXPECT_EQ(list[static_cast<size_t>(r + 2)].second.numel(), 0);
      }
    });
  }
}

}  // namespace
}  // namespace artel::comm
