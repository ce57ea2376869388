// The search enumerates only layouts validate_layout accepts, covers the
// degrees a hand count expects, and ranks by predicted step time.
#include "artel/plan/layout_search.h"

#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "artel/core/error.h"
#include "test_cluster.h"

namespace artel::plan {
namespace {

using testing::test_cluster;

const TransformerShape kShape{4, 4, 64, 32, 128};  // L, a, h, s, V

TEST(LayoutSearch, EnumeratesOnlyValidLayouts) {
  const ModelDescription model = transformer_model("small", kShape);
  Workload w;
  w.global_batch = 16;
  const std::vector<Layout> all = enumerate_layouts(model, 8, w, SearchSpace{});
  ASSERT_FALSE(all.empty());
  std::set<std::tuple<int64_t, int64_t, int64_t>> degrees;
  for (const Layout& l : all) {
    EXPECT_NO_THROW(validate_layout(model, l, w, 8)) << describe(l);
    EXPECT_EQ(l.dp * l.tp * l.pp, 8);
    EXPECT_EQ(kShape.n_head % l.tp, 0);
    EXPECT_EQ(kShape.n_layer % l.pp, 0);
    EXPECT_EQ(w.global_batch % (l.dp * l.micro_batches), 0);
    if (l.zero == 3) {
      EXPECT_TRUE(l.tp == 1 && l.pp == 1);
    }
    degrees.insert({l.dp, l.tp, l.pp});
  }
  // tp | 4 heads, pp | 4 layers, dp·tp·pp = 8: (8,1,1) (4,2,1) (4,1,2) (2,4,1) (2,2,2) (2,1,4) (1,2,4) (1,4,2).
  EXPECT_EQ(degrees.size(), 8u);
}

TEST(LayoutSearch, RanksByStepTimeAndMarksWhatDoesNotFit) {
  const ModelDescription model = transformer_model("small", kShape);
  Workload w;
  w.global_batch = 16;
  SearchSpace space;
  space.recompute = {Recompute::none, Recompute::full};
  const std::vector<Prediction> roomy = search_layouts(model, test_cluster(64e9), w, space);
  ASSERT_FALSE(roomy.empty());
  for (size_t i = 1; i < roomy.size(); ++i) EXPECT_LE(roomy[i - 1].time.step, roomy[i].time.step);
  for (const Prediction& p : roomy) EXPECT_TRUE(p.memory.fits());
  const std::vector<Prediction> tight = search_layouts(model, test_cluster(1e5), w, space);
  EXPECT_EQ(tight.size(), roomy.size());
  for (const Prediction& p : tight) EXPECT_FALSE(p.memory.fits());
}

TEST(LayoutSearch, PowerSgdSendsFewerBytesThanTheWholeGradient) {
  // A wide model on 8 hosts of one worker: data parallelism crosses hosts.
  const ModelDescription model = transformer_model("wide", TransformerShape{2, 8, 1024, 64, 256});
  Workload w;
  w.global_batch = 8;
  w.overlap_grad_reduce = false;
  const Cluster c = test_cluster(64e9, 8, 1);
  Layout l{.dp = 8};
  const double whole = predict(model, c, l, w).time.data_parallel;
  l.compression = parse_compression("bf16", 4);
  const double half = predict(model, c, l, w).time.data_parallel;
  l.compression = parse_compression("powersgd", 4);
  const double low_rank = predict(model, c, l, w).time.data_parallel;
  EXPECT_LT(half, whole);
  EXPECT_LT(low_rank, half);
}

TEST(LayoutSearch, RefusesWhatTheIssueRulesOut) {
  const ModelDescription model = transformer_model("small", kShape);
  Workload w;
  w.global_batch = 16;
  EXPECT_THROW(validate_layout(model, Layout{.dp = 3, .tp = 2}, w, 8), Error);             // 3·2·1 != 8
  EXPECT_THROW(validate_layout(model, Layout{.dp = 1, .tp = 8}, w, 8), Error);             // 8 does not divide 4 heads
  EXPECT_THROW(validate_layout(model, Layout{.dp = 1, .pp = 8}, w, 8), Error);             // 8 does not divide 4 layers
  EXPECT_THROW(validate_layout(model, Layout{.dp = 8, .micro_batches = 3}, w, 8), Error);  // 8·3 does not divide 16
  EXPECT_THROW(validate_layout(model, Layout{.dp = 4, .tp = 2, .zero = 3}, w, 8), Error);  // ZeRO-3 is dp alone
}

}  // namespace
}  // namespace artel::plan
