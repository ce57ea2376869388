// PowerSGD: the orthonormalisation, which gradients are compressed, exactness
// where the averaged gradient's rank is within r, error feedback's
// bookkeeping, and DDP reducing through it.
#include "artel/parallel/powersgd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "artel/autograd/ops.h"
#include "artel/comm/thread_group.h"
#include "artel/parallel/distributed_data_parallel.h"
#include "parallel/parallel_testing.h"

namespace artel::parallel {
namespace {

using autograd::Variable;
using parallel_testing::randn;

TEST(PowerSgd, OrthonormalizedColumnsAreOrthonormalAndADependentOneBecomesZero) {
  const int64_t rows = 20, cols = 4;
  Tensor a = randn({rows, cols}, 5);
  float* p = a.data<float>();
  for (int64_t i = 0; i < rows; ++i) p[i * cols + 3] = 2 * p[i * cols + 0] - p[i * cols + 1];  // in the span
  orthonormalize_columns(p, rows, cols);
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t k = 0; k < cols; ++k) {
      double dot = 0;
      for (int64_t i = 0; i < rows; ++i) dot += static_cast<double>(p[i * cols + j]) * p[i * cols + k];
      const double want = j == k && j < 3 ? 1.0 : 0.0;
      EXPECT_NEAR(dot, want, 1e-3) << "columns " << j << ", " << k;
    }
}

TEST(PowerSgd, CompressesOnlyWhereItSavesHalfTheBytes) {
  EXPECT_TRUE(powersgd_compresses(128, 384, 4));   // 512·4·2 < 49,152
  EXPECT_FALSE(powersgd_compresses(8, 8, 4));      // 16·4·2 = 128 > 64
  EXPECT_FALSE(powersgd_compresses(1000, 1, 1));   // a vector
  EXPECT_TRUE(powersgd_compresses(12, 12, 1));     // 24·2 < 144
  EXPECT_FALSE(powersgd_compresses(12, 12, 3));    // 72·2 = 144
}

// A bucket of a 32 x 24 matrix and a 24-vector. Rank k's matrix gradient
// is u_k v_kᵀ, so the average has rank 2 ≤ r: PowerSGD returns it exactly.
TEST(PowerSgd, ReturnsTheAverageExactlyWhenItsRankIsWithinR) {
  const int64_t rows = 32, cols = 24, numel = rows * cols + cols;
  comm::spawn_threads(2, [&](comm::ProcessGroup& pg) {
    auto bucket_of = [&](int rank) {
      Tensor b = Tensor::empty({numel});
      Tensor u = randn({rows}, 10 + rank), v = randn({cols}, 20 + rank), bias = randn({cols}, 30 + rank);
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) b.data<float>()[i * cols + j] = u.data<float>()[i] * v.data<float>()[j];
      std::memcpy(b.data<float>() + rows * cols, bias.raw(), bias.nbytes());
      return b;
    };
    Tensor want = Tensor::zeros({numel});
    for (int r = 0; r < 2; ++r) {
      Tensor b = bucket_of(r);
      for (int64_t i = 0; i < numel; ++i) want.data<float>()[i] += 0.5f * b.data<float>()[i];
    }
    PowerSgdBucket ps({{0, rows, cols}, {rows * cols, cols, 1}}, pg, {.rank = 4, .start_step = 0});
    ASSERT_EQ(ps.compressed_count(), 1);
    EXPECT_EQ(ps.compressed_numel(), cols + 4 * (rows + cols));
    Tensor mine = bucket_of(pg.rank());
    float* data = mine.data<float>();
    ps.begin(data)->wait();
    ps.middle(data)->wait();
    ps.end(data);
    parallel_testing::expect_close(mine, want, "rank " + std::to_string(pg.rank()), 1e-4f);
  });
}

// With the same full-rank gradient G on every rank, a rank-1 approximation
// leaves most of G out of each step; error feedback sends it later, so the
// mean of what the steps sent approaches G (without it, it would stay at G's
// rank-1 part).
TEST(PowerSgd, ErrorFeedbackSendsWhatEarlierStepsLeftOut) {
  const int64_t rows = 16, cols = 12, n = rows * cols;
  comm::spawn_threads(2, [&](comm::ProcessGroup& pg) {
    const Tensor g = randn({rows, cols}, 42);
    PowerSgdBucket ps({{0, rows, cols}}, pg, {.rank = 1, .start_step = 0});
    std::vector<double> sent(static_cast<size_t>(n), 0.0);
    Tensor bucket = Tensor::empty({n});
    auto relative_miss = [&](int steps) {  // |mean sent − G| / |G|
      double miss = 0, norm = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double gi = g.data<float>()[i], d = sent[static_cast<size_t>(i)] / steps - gi;
        miss += d * d, norm += gi * gi;
      }
      return std::sqrt(miss / norm);
    };
    double first = 0;
    for (int t = 1; t <= 200; ++t) {
      std::memcpy(bucket.raw(), g.raw(), g.nbytes());
      ps.begin(bucket.data<float>())->wait();
      ps.middle(bucket.data<float>())->wait();
      ps.end(bucket.data<float>());
      for (int64_t i = 0; i < n; ++i) sent[static_cast<size_t>(i)] += bucket.data<float>()[i];
      if (t == 1) first = relative_miss(1);
    }
    EXPECT_GT(first, 0.3);  // one rank-1 step misses much of a random 16 x 12 matrix
    EXPECT_LT(relative_miss(200), 0.1 * first);
  });
}

TEST(PowerSgd, DdpAveragesPlainlyFirstThenThroughPowerSgd) {
  // One sample per rank through a 32 x 24 linear layer: each weight gradient
  // has rank 1, their average rank 2, so rank 4 is exact.
  const int64_t in = 24, out = 32;
  Tensor w0 = randn({out, in}, 3), b0 = randn({out}, 4);
  auto loss = [&](const Variable& w, const Variable& b, const Tensor& x) {
    Variable y = autograd::linear(Variable(x), w, b);
    return autograd::mean(autograd::mul(y, y));
  };
  comm::spawn_threads(2, [&](comm::ProcessGroup& pg) {
    DistributedDataParallel::NamedParameters params = {{"fc.weight", Variable(w0.clone(), true)},
                                                       {"fc.bias", Variable(b0.clone(), true)}};
    DistributedDataParallel ddp(params, pg, {.powersgd = PowerSgdOptions{.rank = 4, .start_step = 1}});
    EXPECT_NE(ddp.describe().find("PowerSGD rank 4 from step 2: 1 of 2 gradients compressed"), std::string::npos)
        << ddp.describe();
    for (int step = 0; step < 3; ++step) {
      // The reference: both samples' gradients averaged, computed here alone.
      Variable rw(w0.clone(), true), rb(b0.clone(), true);
      Tensor xs = randn({2, in}, 100 + step);
      for (int r = 0; r < 2; ++r) loss(rw, rb, xs.slice0(r, r + 1)).backward();
      for (auto& [name, p] : params) p.zero_grad();
      loss(params[0].second, params[1].second, xs.slice0(pg.rank(), pg.rank() + 1)).backward();
      ddp.finish();
      const int64_t plain = 4 * (out * in + out), compressed = 4 * (out + 4 * (out + in));
      EXPECT_EQ(ddp.reduced_bytes_last_step(), step == 0 ? plain : compressed) << "step " << step;
      Tensor want_w = rw.grad().clone(), want_b = rb.grad().clone();
      for (int64_t i = 0; i < want_w.numel(); ++i) want_w.data<float>()[i] *= 0.5f;
      for (int64_t i = 0; i < want_b.numel(); ++i) want_b.data<float>()[i] *= 0.5f;
      // From the second compressed step on, each rank's matrix carries its error
      // feedback (its own gradient minus the average: as large as the gradient),
      // which cancels in the average only up to rounding.
      parallel_testing::expect_close(params[0].second.grad(), want_w, "weight, step " + std::to_string(step),
                                     step < 2 ? 1e-4f : 3e-3f);
      parallel_testing::expect_close(params[1].second.grad(), want_b, "bias, step " + std::to_string(step), 1e-5f);
    }
  });
}

TEST(PowerSgd, RefusesShardedGradientsAndABf16Wire) {
  comm::spawn_threads(2, [&](comm::ProcessGroup& pg) {
    DistributedDataParallel::NamedParameters params = {{"w", Variable(randn({64, 64}, 1), true)}};
    EXPECT_THROW(DistributedDataParallel(params, pg,
                                         {.shard_optimizer = true, .shard_gradients = true, .powersgd = PowerSgdOptions{}}),
                 Error);
    EXPECT_THROW(DistributedDataParallel(params, pg, {.wire = DType::bf16, .powersgd = PowerSgdOptions{}}), Error);
  });
}

}  // namespace
}  // namespace artel::parallel
