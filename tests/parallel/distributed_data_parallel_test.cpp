// DDP over ranks-as-threads: the averaged gradients of N workers on their
// shares equal one worker's gradients on the whole batch.
#include "artel/parallel/distributed_data_parallel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "artel/autograd/ops.h"
#include "artel/comm/thread_group.h"
#include "artel/optim/clip.h"
#include "artel/optim/sgd.h"
#include "parallel/parallel_testing.h"

namespace artel::parallel {
namespace {

using autograd::Variable;
using NamedParameters = DistributedDataParallel::NamedParameters;

using parallel_testing::error_of;
using parallel_testing::randn;

// A two-layer net: tanh(x·w1ᵀ + b1)·w2ᵀ + b2, loss = mean(out²).
struct Net {
  NamedParameters params;
  explicit Net(uint64_t seed) {
    params = {{"fc1.weight", Variable(randn({4, 3}, seed), true)},
              {"fc1.bias", Variable(randn({4}, seed + 1), true)},
              {"fc2.weight", Variable(randn({2, 4}, seed + 2), true)},
              {"fc2.bias", Variable(randn({2}, seed + 3), true)}};
  }
  Variable loss(const Tensor& x) {
    Variable h = autograd::tanh(autograd::linear(Variable(x), params[0].second, params[1].second));
    Variable out = autograd::linear(h, params[2].second, params[3].second);
    return autograd::mean(autograd::mul(out, out));
  }
};

const BucketOptions kSmallBuckets{.first_bucket_bytes = 8, .bucket_bytes = 16};  // one bucket a parameter

TEST(DistributedDataParallel, AveragedGradientsEqualOneWorkerOnTheWholeBatch) {
  Tensor x = randn({8, 3}, 77);
  Net single(1);
  single.loss(x).backward();

  for (int world : {2, 4}) {
    comm::spawn_threads(world, [&](comm::ProcessGroup& pg) {
      Net net(100 + pg.rank());  // different weights: DDP must broadcast rank 0's
      if (pg.rank() == 0) net = Net(1);
      DistributedDataParallel ddp(net.params, pg, {.buckets = kSmallBuckets});
      EXPECT_EQ(ddp.describe(), "4 all-reduce buckets: 8 B, 32 B, 16 B, 48 B");
      int64_t share = 8 / world;
      net.loss(x.slice0(pg.rank() * share, (pg.rank() + 1) * share)).backward();
      ddp.finish();
      for (size_t i = 0; i < net.params.size(); ++i) {
        auto want = single.params[i].second.grad().to_vector();
        auto got = net.params[i].second.grad().to_vector();
        ASSERT_EQ(want.size(), got.size());
        for (size_t j = 0; j < want.size(); ++j)
          EXPECT_NEAR(got[j], want[j], 1e-5f) << net.params[i].first << "[" << j << "] world " << world;
      }
    });
  }
}

TEST(DistributedDataParallel, NoSyncAccumulatesLocallyThenAverages) {
  Tensor x = randn({8, 3}, 5);
  Net single(1);
  // One worker, two micro-batches of 4 accumulated: the gradient of the sum of their means.
  single.loss(x.slice0(0, 4)).backward();
  single.loss(x.slice0(4, 8)).backward();

  comm::spawn_threads(2, [&](comm::ProcessGroup& pg) {
    Net net(1);
    DistributedDataParallel ddp(net.params, pg, {.buckets = kSmallBuckets});
    // Each rank: micro-batches of 2 rows; ranks' rows interleave as a sampler would.
    int r = pg.rank();
    {
      auto guard = ddp.no_sync();
      net.loss(x.slice0(2 * r, 2 * r + 2)).backward();
    }
    net.loss(x.slice0(4 + 2 * r, 4 + 2 * r + 2)).backward();
    ddp.finish();
    for (size_t i = 0; i < net.params.size(); ++i) {
      auto want = single.params[i].second.grad().to_vector();
      auto got = net.params[i].second.grad().to_vector();
      for (size_t j = 0; j < want.size(); ++j) EXPECT_NEAR(got[j], want[j], 1e-5f) << net.params[i].first;
    }
  });
}

TEST(DistributedDataParallel, ParameterWithoutGradientIsNamed) {
  comm::spawn_threads(2, [](comm::ProcessGroup& pg) {
    Net net(1);
    DistributedDataParallel ddp(net.params, pg, {.buckets = kSmallBuckets});
    // fc2.bias takes no part in this loss.
    Variable h = autograd::linear(Variable(randn({2, 3}, 9)), net.params[0].second, net.params[1].second);
    Variable out = autograd::linear(h, net.params[2].second, Variable());
    autograd::mean(out).backward();
    try {
      ddp.finish();
      ADD_FAILURE() << "finish() accepted a parameter without a gradient";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("fc2.bias"), std::string::npos) << e.what();
    }
  });
}

// What the buckets cannot average is refused, naming the parameter, before
// anything is copied: an int64 was copied into a float bucket sized by
// elements (a heap overflow), and a Linear registered twice stepped twice.
TEST(DistributedDataParallel, ParametersItCannotAverageAreRefusedNamingThem) {
  comm::spawn_threads(2, [](comm::ProcessGroup& pg) {
    auto refusal = [&](NamedParameters params) {
      return error_of([&] { DistributedDataParallel ddp(params, pg, {}); });
    };
    const Variable w(randn({4, 3}, 1), true);
    EXPECT_NE(refusal({{"w", w}, {"late", Variable(Tensor(), true)}})
                  .find("parameter 'late' has no value: it was declared but not materialised"),
              std::string::npos);
    EXPECT_NE(refusal({{"w", w}, {"ids", Variable(Tensor::zeros({12}, DType::i64))}})
                  .find("parameter 'ids' is int64; gradients are averaged in float32 buckets"),
              std::string::npos);
    EXPECT_NE(refusal({{"w", w}, {"frozen", Variable(randn({2}, 2), false)}})
                  .find("parameter 'frozen' is frozen (requires no gradient)"),
              std::string::npos);
    EXPECT_NE(refusal({{"a.weight", w}, {"b.weight", w}})
                  .find("parameter 'b.weight' is a parameter listed earlier under another name"),
              std::string::npos);
  });
}

// Ranks that declared their parameters in another order, shape or number
// trained silently apart (the broadcast checked only the total size).
TEST(DistributedDataParallel, RanksWrappingDifferentModelsAreNamed) {
  auto refusal_on_each = [](std::function<NamedParameters(int rank)> params_of) {
    std::vector<std::string> said(2);
    comm::spawn_threads(2, [&](comm::ProcessGroup& pg) {
      said[static_cast<size_t>(pg.rank())] =
          error_of([&] { DistributedDataParallel ddp(params_of(pg.rank()), pg, {}); });
    });
    EXPECT_EQ(said[0], said[1]) << "every rank says the same";
    return said[0];
  };
  // Each rank its own tensors, as each process has: ranks-as-threads sharing
  // one would add their hooks to it at once.
  auto a = [] { return Variable(randn({8, 4}, 1), true); };
  auto b = [] { return Variable(randn({4, 8}, 2), true); };
  auto c = [] { return Variable(randn({4}, 3), true); };
  EXPECT_NE(refusal_on_each([&](int r) { return NamedParameters{{"w", r ? b() : a()}}; })
                .find("ranks wrap different models: parameter 0 is 'w [4, 8]' on rank 1 and 'w [8, 4]' on rank 0"),
            std::string::npos);
  EXPECT_NE(refusal_on_each([&](int r) {
              return r ? NamedParameters{{"v", c()}, {"w", a()}} : NamedParameters{{"w", a()}, {"v", c()}};
            }).find("parameter 0 is 'v [4]' on rank 1 and 'w [8, 4]' on rank 0"),
            std::string::npos);
  EXPECT_NE(refusal_on_each([&](int r) { return r ? NamedParameters{{"w", a()}} : NamedParameters{{"w", a()}, {"v", c()}}; })
                .find("parameter 1 is none (its list has 1) on rank 1 and 'v [4]' on rank 0"),
            std::string::npos);
  EXPECT_EQ(refusal_on_each([&](int) { return NamedParameters{{"w", a()}, {"v", c()}}; }), "");
}

// The parameters outlive their DDP: its hooks go with it. They pointed at
// the destroyed DDP, so a backward after it read freed memory.
TEST(DistributedDataParallel, ABackwardAfterTheWrapperIsGoneTouchesNothingOfIt) {
  comm::spawn_threads(2, [](comm::ProcessGroup& pg) {
    Net net(1);
    { DistributedDataParallel ddp(net.params, pg, {.buckets = kSmallBuckets}); }
    net.loss(randn({2, 3}, 4)).backward();
    for (const auto& [name, p] : net.params) EXPECT_TRUE(p.grad().defined()) << name;
    DistributedDataParallel again(net.params, pg, {.buckets = kSmallBuckets});  // and it can be wrapped anew
    for (auto& [name, p] : net.params) p.zero_grad();
    net.loss(randn({2, 3}, 4)).backward();
    again.finish();
  });
}

// Sharded, the optimizer learns its ranges by name: one over another
// model's tensors of the same names stepped tensors nobody trained.
TEST(DistributedDataParallel, ShardingAnOptimizerOverOtherTensorsIsRefused) {
  comm::spawn_threads(2, [](comm::ProcessGroup& pg) {
    Net net(1), other(1);
    DistributedDataParallel ddp(net.params, pg, {.shard_optimizer = true});
    optim::Sgd wrong(optim::one_group(other.params, 0.1f), {});
    EXPECT_NE(error_of([&] { ddp.shard(wrong); })
                  .find("DistributedDataParallel::shard: the optimizer's 'fc1.weight' is another tensor than the one "
                        "wrapped under that name"),
              std::string::npos);
    optim::Sgd right(optim::one_group(net.params, 0.1f), {});
    EXPECT_EQ(error_of([&] { ddp.shard(right); }), "");
    // Stepped directly, it updated only this rank's block; the others' never came.
    net.loss(randn({2, 3}, 4)).backward();
    ddp.finish();
    EXPECT_NE(error_of([&] { right.step(); })
                  .find("an optimizer sharded by DistributedDataParallel was stepped directly"),
              std::string::npos);
    EXPECT_EQ(error_of([&] { ddp.step(right); }), "");
  });
}

// finish() between backward and step, once: a step without it read
// gradients the all-reduces were still writing, and the replicas drifted.
TEST(DistributedDataParallel, StepWithoutFinishAndFinishTwiceAreRefused) {
  comm::spawn_threads(2, [](comm::ProcessGroup& pg) {
    Net net(1);
    DistributedDataParallel ddp(net.params, pg, {.buckets = kSmallBuckets});
    optim::Sgd opt(optim::one_group(net.params, 0.1f), {});
    net.loss(randn({2, 3}, 4)).backward();
    EXPECT_NE(error_of([&] { ddp.step(opt); }).find("step() after a backward that finish() has not averaged yet"),
              std::string::npos);
    ddp.finish();
    EXPECT_NE(error_of([&] { ddp.finish(); }).find("finish() with no backward since the last finish()"),
              std::string::npos);
    ddp.step(opt);
    {
      auto guard = ddp.no_sync();
      net.loss(randn({2, 3}, 5)).backward();
      EXPECT_NE(error_of([&] { ddp.finish(); }).find("finish() inside no_sync()"), std::string::npos);
    }
    net.loss(randn({2, 3}, 6)).backward();
    ddp.finish();
    ddp.step(opt);
  });
}

TEST(DistributedDataParallel, UnusedParametersCountAsZeroWhenAllowed) {
  comm::spawn_threads(2, [](comm::ProcessGroup& pg) {
    Net net(1);
    DistributedDataParallel ddp(net.params, pg, {.buckets = kSmallBuckets, .allow_unused_parameters = true});
    Variable h = autograd::linear(Variable(randn({2, 3}, 9)), net.params[0].second, net.params[1].second);
    autograd::mean(autograd::linear(h, net.params[2].second, Variable())).backward();
    ddp.finish();
    for (float g : net.params[3].second.grad().to_vector()) EXPECT_EQ(g, 0.0f);
  });
}

// Sharded (ZeRO stages 1 and 2): each rank updates its block of every bucket
// and the weights are all-gathered; stage 2 keeps only that block of the
// averaged gradients, reducing every micro-step. After a few SGD steps of two
// micro-steps with momentum and clipping, every rank holds the weights of the
// replicated step (the norm and the micro-steps are summed in another order:
// float rounding only), and the gathered optimizer state is the replicated one.
TEST(DistributedDataParallel, ShardedStepEqualsTheReplicatedStep) {
  Tensor x = randn({8, 3}, 9);
  for (int world : {2, 4}) {
    std::vector<std::vector<float>> replicated(4), sharded(4), momentum(4);
    for (int stage : {0, 1, 2}) {
      const bool shard = stage >= 1;
      // 256 B of registered memory: the first buckets get it, the rest fall back to plain memory.
      comm::GroupOptions small;
      small.registered_bytes = 256;
      comm::spawn_threads(world, [&](comm::ProcessGroup& pg) {
        Net net(1);
        optim::Sgd opt(optim::one_group(net.params, 0.1f), {.momentum = 0.9f});
        DistributedDataParallel ddp(net.params, pg,
                                    {.buckets = kSmallBuckets, .shard_optimizer = shard, .shard_gradients = stage == 2});
        ddp.shard(opt);
        const int64_t share = 8 / world, half = share / 2;
        for (int step = 0; step < 3; ++step) {
          opt.zero_grad();
          const int64_t first = pg.rank() * share;
          {
            auto local = ddp.no_sync();
            net.loss(x.slice0(first, first + half)).backward(Tensor::full({}, 0.5f));
          }
          net.loss(x.slice0(first + half, first + share)).backward(Tensor::full({}, 0.5f));
          ddp.finish();
          if (stage == 2) {  // no whole gradient is kept, only this rank's blocks
            for (auto& [name, p] : net.params) EXPECT_FALSE(p.grad().defined()) << name;
            EXPECT_LE(ddp.gradient_bytes(), 4 * (4 * 3 + 4 + 2 * 4 + 2) / world + 4 * 16 * 4);
          }
          ddp.step(opt, optim::clip_coefficient(ddp.grad_norm(), 0.05f));
        }
        const optim::OptimizerState state = ddp.gather_optimizer_state(opt);
        for (size_t i = 0; i < net.params.size(); ++i) {
          std::vector<float> w = net.params[i].second.value().to_vector();
          std::vector<float> m = state.at("momentum_buffer." + net.params[i].first).to_vector();
          // The optimizer itself keeps only the elements this rank updates.
          EXPECT_EQ(opt.buffers(net.params[i].first).empty() ? 0 : opt.buffers(net.params[i].first)[0].numel(),
                    opt.owned(net.params[i].first).size());
          if (!shard && pg.rank() == 0) replicated[i] = w, momentum[i] = m;
          if (!shard) continue;
          if (pg.rank() == world - 1) sharded[i] = w;  // the weights of the last rank, the one furthest from 0
          for (size_t j = 0; j < m.size(); ++j)  // every rank holds the whole state after the gather
            EXPECT_NEAR(m[j], momentum[i][j], 1e-6f) << net.params[i].first << " momentum, stage " << stage;
        }
      }, small);
      if (!shard) continue;
      for (size_t i = 0; i < 4; ++i)
        for (size_t j = 0; j < replicated[i].size(); ++j)
          EXPECT_NEAR(sharded[i][j], replicated[i][j], 1e-6f) << "param " << i << "[" << j << "] world " << world
                                                              << " stage " << stage;
    }
  }
}

// A language model's shape in miniature: a table looked up by ids and tied
// to the head, between them a layer: mean(logits²), logits = tanh(E[ids]·Wᵀ + b)·Eᵀ.
struct TiedNet {
  NamedParameters params;
  TiedNet(uint64_t seed, int64_t rows) {
    params = {{"table", Variable(randn({rows, 3}, seed), true)},
              {"fc.weight", Variable(randn({3, 3}, seed + 1), true)},
              {"fc.bias", Variable(randn({3}, seed + 2), true)}};
  }
  Variable loss(const Tensor& ids) {
    Variable h = autograd::tanh(autograd::linear(autograd::embedding(params[0].second, ids), params[1].second, params[2].second));
    Variable logits = autograd::linear(h, params[0].second, Variable());
    return autograd::mean(autograd::mul(logits, logits));
  }
};

// The 16 ids a step of the table tests looks up: a rank's share of them in
// two micro-steps (`part` 0, then 1).
struct TableIds {
  Tensor ids = Tensor::empty({16}, DType::i64);
  explicit TableIds(const std::function<int64_t(int64_t)>& id) {
    for (int64_t k = 0; k < 16; ++k) ids.data<int64_t>()[k] = id(k);
  }
  Tensor half(int world, int rank, int part) const {
    const int64_t share = 16 / world, first = rank * share + part * share / 2;
    return ids.slice0(first, first + share / 2);
  }
};

// One worker's weights after 3 SGD-momentum steps on the whole batch.
template <class Net>
Net one_worker_on_the_whole_batch(int64_t rows, int world, const TableIds& batch) {
  Net single(1, rows);
  optim::Sgd opt(optim::one_group(single.params, 0.1f), {.momentum = 0.9f});
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    for (int rank = 0; rank < world; ++rank)
      for (int part : {0, 1}) single.loss(batch.half(world, rank, part)).backward(Tensor::full({}, 0.5f / static_cast<float>(world)));
    opt.step();
  }
  return single;
}

void expect_weights(const NamedParameters& got, const NamedParameters& want, const std::string& where) {
  for (size_t i = 0; i < got.size(); ++i) {
    const std::vector<float> w = want[i].second.value().to_vector(), g = got[i].second.value().to_vector();
    for (size_t j = 0; j < w.size(); ++j) EXPECT_NEAR(g[j], w[j], 1e-5f) << got[i].first << "[" << j << "] " << where;
  }
}

// Note [Tables apart]: the tied table's bucket is reduced before its
// lookup's rows arrive, which are gathered and added at finish(); the step
// is one worker's on the whole batch, at ZeRO 0, 1 and 2, with a micro-step
// accumulated locally (the rows then go into the gradient; under ZeRO 2,
// which reduces it, they wait aside too), and from the second step the
// table's bucket starts first. The ranks' 8 rows are
// gathered into a table of 12, and reduced as a dense table of 6 (fewer).
TEST(DistributedDataParallel, ATiedTableReducedBeforeItsRowsIsOneWorkersStep) {
  for (int64_t rows : {12, 6}) {
    const TableIds batch([&](int64_t k) { return (k * 5 + k / 3) % rows; });
    for (int world : {2, 4}) {
      const TiedNet single = one_worker_on_the_whole_batch<TiedNet>(rows, world, batch);
      for (int stage : {0, 1, 2}) {
        comm::spawn_threads(world, [&](comm::ProcessGroup& pg) {
          TiedNet net(1, rows);
          optim::Sgd opt(optim::one_group(net.params, 0.1f), {.momentum = 0.9f});
          DistributedDataParallel ddp(net.params, pg,
                                      {.buckets = kSmallBuckets, .shard_optimizer = stage >= 1, .shard_gradients = stage == 2,
                                       .tables = [](const std::string& name) { return name == "table"; }});
          ddp.shard(opt);
          const size_t table_bucket = ddp.buckets().size() - 1;  // the table's own, after the planned ones
          ASSERT_EQ(ddp.buckets()[table_bucket].params, std::vector<int>{0});
          EXPECT_NE(ddp.describe().find(std::to_string(rows * 12) + " B (table, its lookup's rows gathered apart)"), std::string::npos)
              << ddp.describe();
          for (int step = 0; step < 3; ++step) {
            opt.zero_grad();
            {
              auto local = ddp.no_sync();
              net.loss(batch.half(world, pg.rank(), 0)).backward(Tensor::full({}, 0.5f));
            }
            net.loss(batch.half(world, pg.rank(), 1)).backward(Tensor::full({}, 0.5f));
            ddp.finish();
            EXPECT_EQ(ddp.launch_order().front(), table_bucket) << "step " << step;  // ready first, from the head
            ddp.step(opt);
          }
          expect_weights(net.params, single.params,
                         "world " + std::to_string(world) + " stage " + std::to_string(stage) + " table of " + std::to_string(rows));
        });
      }
    }
  }
}

// TiedNet's parameters with the table only looked up, as wordlm's sparse
// one: mean(tanh(E[ids]·Wᵀ + b)²).
struct SparseNet : TiedNet {
  using TiedNet::TiedNet;
  Variable loss(const Tensor& ids) {
    Variable h = autograd::tanh(autograd::linear(autograd::embedding(params[0].second, ids), params[1].second, params[2].second));
    return autograd::mean(autograd::mul(h, h));
  }
};

// Note [Sparse tables]: a sparse table's bucket is never reduced; the rows of
// both micro-steps (one under no_sync) are gathered and added, and the step
// is one worker's on the whole batch at ZeRO 0, 1 and 2 and under PowerSGD,
// on 2 and 4 ranks. A
// rank's lookups of a row are summed before they go (each id is read twice),
// and the ranks' rows are gathered into a table of 40, or reduced as a
// dense table of 6 (fewer than the ranks' distinct rows). The bytes handed
// over count the distinct rows, not the table. Tied to a head, a sparse
// table is refused.
TEST(DistributedDataParallel, ASparseTablesRowsAloneMakeOneWorkersStep) {
  for (int64_t rows : {40, 6}) {
    const TableIds batch([&](int64_t k) { return (k / 2 * 7) % rows; });  // each id twice in a row
    for (int world : {2, 4}) {
      const SparseNet single = one_worker_on_the_whole_batch<SparseNet>(rows, world, batch);
      for (int stage : {0, 1, 2, 3}) {  // 3: ZeRO 0 under PowerSGD (fc's 3 x 3 at rank 4: sent whole)
        comm::spawn_threads(world, [&](comm::ProcessGroup& pg) {
          SparseNet net(1, rows);
          optim::Sgd opt(optim::one_group(net.params, 0.1f), {.momentum = 0.9f});
          std::optional<PowerSgdOptions> powersgd;
          if (stage == 3) powersgd = PowerSgdOptions{.rank = 4, .start_step = 1};
          DistributedDataParallel ddp(net.params, pg,
                                      {.buckets = kSmallBuckets, .shard_optimizer = stage == 1 || stage == 2,
                                       .shard_gradients = stage == 2, .powersgd = powersgd,
                                       .sparse_tables = [](const std::string& name) { return name == "table"; }});
          ddp.shard(opt);
          ASSERT_EQ(ddp.buckets().back().params, std::vector<int>{0});  // the table's own, after the planned ones
          EXPECT_NE(ddp.describe().find(std::to_string(rows * 12) + " B (table, sparse: only its rows gathered)"),
                    std::string::npos) << ddp.describe();
          for (int step = 0; step < 3; ++step) {
            opt.zero_grad();
            {
              auto local = ddp.no_sync();
              net.loss(batch.half(world, pg.rank(), 0)).backward(Tensor::full({}, 0.5f));
            }
            EXPECT_FALSE(net.params[0].second.grad().defined());  // its rows wait aside
            net.loss(batch.half(world, pg.rank(), 1)).backward(Tensor::full({}, 0.5f));
            ddp.finish();
            int64_t most = 0;  // the most distinct rows a rank read in the step (a row's lookups are summed first)
            for (int r = 0; r < world; ++r) {
              std::set<int64_t> distinct;
              for (int part : {0, 1}) {
                const Tensor read = batch.half(world, r, part);
                distinct.insert(read.data<int64_t>(), read.data<int64_t>() + read.numel());
              }
              most = std::max(most, static_cast<int64_t>(distinct.size()));
            }
            const int64_t layer = 4 * (9 + 3);  // fc's two buckets, unsharded
            const int64_t table = world * most <= rows ? most * (8 + 3 * 4) : rows * 3 * 4;  // gathered, or reduced dense
            if (stage == 0 || stage == 3) {
              EXPECT_EQ(ddp.reduced_bytes_last_step(), layer + table);
            }
            ddp.step(opt);
          }
          expect_weights(net.params, single.params,
                         "world " + std::to_string(world) + " stage " + std::to_string(stage) + " table of " + std::to_string(rows));
        });
      }
    }
  }
  comm::spawn_threads(2, [](comm::ProcessGroup& pg) {
    TiedNet net(1, 6);
    DistributedDataParallel ddp(net.params, pg,
                                {.buckets = kSmallBuckets, .sparse_tables = [](const std::string& name) { return name == "table"; }});
    Tensor ids = Tensor::zeros({4}, DType::i64);
    EXPECT_NE(error_of([&] { net.loss(ids).backward(); })
                  .find("'table' is a sparse table, whose gradient is the rows its lookups read, but it got a dense gradient"),
              std::string::npos);
  });
}

}  // namespace
}  // namespace artel::parallel
