// ZeRO-3 over ranks-as-threads: a GPT (tied embedding: the root unit) and an
// MLP trained by N workers whose weights, gradients and AdamW state are
// sharded take the steps of one worker on the whole batch; nothing is
// gathered after a step; micro-steps, recomputation and keeping the gathered
// weights from forward to backward change nothing but float rounding.
#include "artel/parallel/fully_sharded.h"

#include <cmath>
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "artel/autograd/ops.h"
#include "artel/core/memory_stats.h"
#include "artel/models/model.h"
#include "artel/nn/init.h"
#include "artel/optim/adamw.h"
#include "parallel/parallel_testing.h"

namespace artel::parallel {
namespace {

using autograd::Variable;
using parallel_testing::error_of;

models::ModelConfig gpt() {
  models::ModelConfig c;
  c.vocab_size = 11, c.n_layer = 3, c.n_head = 2, c.n_embd = 8, c.block_size = 6;
  return c;
}

models::ModelConfig mlp() {
  models::ModelConfig c;
  c.kind = "mlp";
  return c;
}

// Inputs and targets of a batch of `rows` for the model kind.
struct Batch {
  Tensor x, y;
};
Batch batch(const models::ModelConfig& c, int64_t rows, uint64_t seed) {
  Rng rng(seed);
  Batch b;
  if (c.kind == "gpt") {
    b.x = Tensor::empty({rows, c.block_size}, DType::i64);
    b.y = Tensor::empty({rows, c.block_size}, DType::i64);
    for (int64_t i = 0; i < b.x.numel(); ++i)
      b.x.data<int64_t>()[i] = static_cast<int64_t>(rng.below(11)), b.y.data<int64_t>()[i] = static_cast<int64_t>(rng.below(11));
  } else {
    b.x = parallel_testing::randn({rows, 784}, seed);
    b.y = Tensor::empty({rows}, DType::i64);
    for (int64_t i = 0; i < rows; ++i) b.y.data<int64_t>()[i] = static_cast<int64_t>(rng.below(10));
  }
  return b;
}

Variable loss_of(nn::Model& m, const Tensor& x, const Tensor& y) {
  return autograd::cross_entropy(m.forward(x), y.view({-1}));
}

struct Options {
  int accum = 1;
  bool reshard_after_forward = true;
  nn::Recompute recompute = nn::Recompute::none;
};

constexpr int kSteps = 3;
constexpr int64_t kRows = 8;

// Each parameter's whole value as one worker draws it from the seed.
FullyShardedDataParallel::WholeValue drawn_from_seed(const models::ModelConfig& c) {
  return [&c](const nn::DeclaredParameter& d) {
    Tensor t = Tensor::empty(d.shape);
    nn::fill(t, *d.init, c.seed, nn::stream_of(d.name), d.shape);
    return t;
  };
}

// One worker, the whole batch: the weights after kSteps.
std::map<std::string, std::vector<float>> alone(const models::ModelConfig& c) {
  std::unique_ptr<nn::Model> m = models::make_model(c);
  optim::AdamW opt(optim::one_group(m->named_parameters(), 1e-2f, 0.1f));
  for (int s = 0; s < kSteps; ++s) {
    opt.zero_grad();
    const Batch b = batch(c, kRows, 100 + s);
    loss_of(*m, b.x, b.y).backward();
    opt.step();
  }
  std::map<std::string, std::vector<float>> w;
  for (auto& [name, p] : m->named_parameters()) w[name] = p.value().to_vector();
  return w;
}

void expect_zero3_equals_one_worker(const models::ModelConfig& c, int world, Options o) {
  const auto want = alone(c);
  comm::spawn_threads(world, [&](comm::ProcessGroup& pg) {
    std::unique_ptr<nn::Model> m = models::declare_model(c);
    m->set_recompute(o.recompute);
    FullyShardedDataParallel fsdp(*m, pg, {.reshard_after_forward = o.reshard_after_forward},
                                  drawn_from_seed(c));
    optim::AdamW opt(optim::one_group(fsdp.parameters(), 1e-2f, 0.1f));
    fsdp.shard(opt);
    int64_t whole = 0;
    for (auto& [name, p] : fsdp.parameters()) whole += p.numel() * 4;
    const int64_t share = kRows / world / o.accum;
    for (int s = 0; s < kSteps; ++s) {
      opt.zero_grad();
      const Batch b = batch(c, kRows, 100 + s);
      for (int k = 0; k < o.accum; ++k) {
        const int64_t first = (pg.rank() * o.accum + k) * share;
        std::unique_ptr<FullyShardedDataParallel::NoSync> micro;
        if (k + 1 < o.accum) micro = std::make_unique<FullyShardedDataParallel::NoSync>(fsdp);
        loss_of(*m, b.x.slice0(first, first + share), b.y.slice0(first, first + share))
            .backward(Tensor::full({}, 1.0f / static_cast<float>(o.accum)));
      }
      fsdp.finish();
      opt.step();
    }
    // Only the shards are held: no parameter has bytes or a gradient between steps.
    for (auto& [name, p] : fsdp.parameters()) {
      EXPECT_EQ(p.value().storage()->data(), nullptr) << name << " is still gathered";
      EXPECT_FALSE(p.grad().defined()) << name;
    }
    EXPECT_LE(fsdp.gradient_bytes(), whole / world + 64 * 8 * world) << "the gradient shards";
    std::map<std::string, Tensor> got;
    fsdp.for_each_whole([&](const std::string& name, const Tensor& t) { got[name] = t.clone(); });
    // Absolute: AdamW turns the float noise of a zero gradient (an attention
    // key's bias) into steps of ~1e-6 on weights near zero. It normalises a
    // step to about lr whatever the gradient's size, so where the gradient is
    // a few rounding errors (an MNIST border pixel seen by a handful of rows)
    // the summation order decides its sign: one such weight of the first
    // layer ended 7.2e-5 apart on AMD Zen 3 under the sanitizer build (-O1).
    // At most one weight in 10,000 may do that, and by no more than lr a step.
    for (const auto& [name, w] : want) {
      const std::vector<float> g = got.at(name).to_vector();
      ASSERT_EQ(g.size(), w.size()) << name;
      size_t noise_led = 0;
      for (size_t i = 0; i < w.size(); ++i) {
        if (std::abs(g[i] - w[i]) <= 5e-5f) continue;
        ++noise_led;
        EXPECT_NEAR(g[i], w[i], kSteps * 1e-2f) << name << "[" << i << "] rank " << pg.rank();
      }
      EXPECT_LE(noise_led, w.size() / 10000) << name << ": weights further than 5e-5 from one worker's, rank " << pg.rank();
    }
  });
}

TEST(FullyShardedDataParallel, GptEqualsOneWorker) { expect_zero3_equals_one_worker(gpt(), 2, {}); }
TEST(FullyShardedDataParallel, GptOnFourRanksWithMicroStepsEqualsOneWorker) {
  expect_zero3_equals_one_worker(gpt(), 4, {.accum = 2});
}
TEST(FullyShardedDataParallel, GptKeepingGatheredWeightsWithRecomputeEqualsOneWorker) {
  expect_zero3_equals_one_worker(gpt(), 2, {.reshard_after_forward = false, .recompute = nn::Recompute::full});
}
TEST(FullyShardedDataParallel, MlpEqualsOneWorker) { expect_zero3_equals_one_worker(mlp(), 2, {}); }

// A forward without a graph (evaluation) gathers each unit as it runs and
// leaves nothing gathered.
TEST(FullyShardedDataParallel, EvaluationLeavesNothingGathered) {
  const models::ModelConfig c = gpt();
  std::unique_ptr<nn::Model> ref = models::make_model(c);
  const Batch b = batch(c, 2, 5);
  const Tensor want = ref->forward(b.x).value();
  comm::spawn_threads(2, [&](comm::ProcessGroup& pg) {
    std::unique_ptr<nn::Model> m = models::declare_model(c);
    FullyShardedDataParallel fsdp(*m, pg, {}, drawn_from_seed(c));
    autograd::NoGradGuard no_graph;
    parallel_testing::expect_close(m->forward(b.x).value(), want, "logits");
    for (auto& [name, p] : fsdp.parameters()) EXPECT_EQ(p.value().storage()->data(), nullptr) << name << " is still gathered";
  });
}

// The root (the embedding tied to the head) is staged when backward starts,
// so the head's product writes the embedding's gradient into the staging and
// the lookup adds onto it there: no vocabulary-sized gradient of its own, as
// when the root was staged only once its gradient was final, then copied.
TEST(FullyShardedDataParallel, TheTiedEmbeddingsGradientIsWrittenIntoItsStaging) {
  models::ModelConfig c;
  c.vocab_size = 8192, c.n_layer = 1, c.n_head = 2, c.n_embd = 32, c.block_size = 4;
  const int64_t wte_bytes = c.vocab_size * c.n_embd * 4;  // 1 MiB; backward allocates ~5 KiB besides
  comm::spawn_threads(1, [&](comm::ProcessGroup& pg) {
    std::unique_ptr<nn::Model> m = models::declare_model(c);
    FullyShardedDataParallel fsdp(*m, pg, {}, drawn_from_seed(c));
    optim::AdamW opt(optim::one_group(fsdp.parameters(), 1e-2f, 0.1f));
    fsdp.shard(opt);
    Batch b = batch(c, 1, 3);
    for (int64_t i = 0; i < b.x.numel(); ++i) b.x.data<int64_t>()[i] %= 11, b.y.data<int64_t>()[i] %= 11;
    for (int step = 0; step < 2; ++step) {  // the second with every buffer already made once
      opt.zero_grad();
      Variable loss = loss_of(*m, b.x, b.y);
      reset_peak_tensor_bytes();
      const int64_t before = live_tensor_bytes();
      loss.backward();
      EXPECT_LT(peak_tensor_bytes() - before, wte_bytes / 2) << "step " << step;
      fsdp.finish();
      opt.step();
    }
  });
}

// The model and a graph its forward recorded outlive the wrapper: both
// refuse to run once it is gone (a backward then segfaulted, a forward read
// freed hooks), and a second wrapper over a live one's model is refused.
TEST(FullyShardedDataParallel, AModelOrGraphOutlivingItRefusesToRun) {
  const models::ModelConfig c = mlp();
  const Batch b = batch(c, 2, 5);
  comm::spawn_threads(2, [&](comm::ProcessGroup& pg) {
    std::unique_ptr<nn::Model> m = models::declare_model(c);
    Variable loss;
    {
      FullyShardedDataParallel fsdp(*m, pg, {}, drawn_from_seed(c));
      EXPECT_NE(error_of([&] { FullyShardedDataParallel again(*m, pg, {}, drawn_from_seed(c)); })
                    .find("the model's pieces are hooked already by a FullyShardedDataParallel"),
                std::string::npos);
      loss = loss_of(*m, b.x, b.y);
    }
    EXPECT_NE(error_of([&] { loss.backward(); })
                  .find("backward through a forward that FullyShardedDataParallel ran, after it was destroyed"),
              std::string::npos);
    EXPECT_NE(error_of([&] { m->forward(b.x); })
                  .find("the model's weights were sharded by a FullyShardedDataParallel that is gone"),
              std::string::npos);
  });
}

// Ranks that declared another model (one width apart: padding hid it from
// the gathers' size checks) are named; finish() before shard() is refused
// (the optimizer stepped freed gathered weights).
TEST(FullyShardedDataParallel, DifferentModelsAndAMissingShardAreRefused) {
  std::vector<std::string> said(2);
  comm::spawn_threads(2, [&](comm::ProcessGroup& pg) {
    models::ModelConfig c = gpt();
    if (pg.rank() == 1) c.block_size += 1;  // a longer position table on one rank
    std::unique_ptr<nn::Model> m = models::declare_model(c);
    said[static_cast<size_t>(pg.rank())] = error_of([&] { FullyShardedDataParallel f(*m, pg, {}, drawn_from_seed(c)); });
  });
  for (const std::string& e : said)
    EXPECT_NE(e.find("FullyShardedDataParallel: ranks wrap different models: parameter 1 is 'transformer.wpe.weight"),
              std::string::npos)
        << e;
  const models::ModelConfig c = mlp();
  const Batch b = batch(c, 2, 5);
  comm::spawn_threads(2, [&](comm::ProcessGroup& pg) {
    std::unique_ptr<nn::Model> m = models::declare_model(c);
    FullyShardedDataParallel fsdp(*m, pg, {}, drawn_from_seed(c));
    loss_of(*m, b.x, b.y).backward();
    EXPECT_NE(error_of([&] { fsdp.finish(); }).find("finish() before shard(optimizer)"), std::string::npos);
    EXPECT_NE(error_of([&] { fsdp.owned_value("nope"); }).find("FullyShardedDataParallel: no parameter 'nope'"),
              std::string::npos);
  });
  // A whole value that does not fit: said in the API's words (it said "--zero 3", a flag no program passed).
  comm::spawn_threads(1, [&](comm::ProcessGroup& pg) {
    std::unique_ptr<nn::Model> m = models::declare_model(c);
    auto misshapen = [](const nn::DeclaredParameter&) { return Tensor::zeros({3}); };
    EXPECT_NE(error_of([&] { FullyShardedDataParallel f(*m, pg, {}, misshapen); })
                  .find("FullyShardedDataParallel: the whole value of net.0.weight is float32 [3], the model declares "
                        "float32 [512, 784]"),
              std::string::npos);
  });
}

// An optimizer step before finish() read shards that reduce-scatters were
// still writing: refused; after finish() the same step goes ahead.
TEST(FullyShardedDataParallel, AStepBeforeFinishIsRefused) {
  const models::ModelConfig c = mlp();
  const Batch b = batch(c, 2, 5);
  comm::spawn_threads(2, [&](comm::ProcessGroup& pg) {
    std::unique_ptr<nn::Model> m = models::declare_model(c);
    FullyShardedDataParallel fsdp(*m, pg, {}, drawn_from_seed(c));
    optim::AdamW opt(optim::one_group(fsdp.parameters(), 1e-2f, 0.1f));
    fsdp.shard(opt);
    loss_of(*m, b.x, b.y).backward();
    EXPECT_NE(error_of([&] { opt.step(); })
                  .find("optimizer step after a backward that FullyShardedDataParallel::finish() has not reduced yet"),
              std::string::npos);
    fsdp.finish();
    EXPECT_EQ(error_of([&] { opt.step(); }), "");
  });
}

// Ranks handed different whole values (one drew from another seed) are
// named with the first parameter that differs: each keeps only its block, so
// they trained a model of mixed pieces without a word.
TEST(FullyShardedDataParallel, RanksHandedDifferentValuesAreNamed) {
  std::vector<std::string> said(2);
  comm::spawn_threads(2, [&](comm::ProcessGroup& pg) {
    models::ModelConfig c = gpt();
    c.seed = pg.rank() == 1 ? 8 : 7;
    std::unique_ptr<nn::Model> m = models::declare_model(c);
    said[static_cast<size_t>(pg.rank())] = error_of([&] { FullyShardedDataParallel f(*m, pg, {}, drawn_from_seed(c)); });
  });
  for (const std::string& e : said)
    EXPECT_NE(e.find("FullyShardedDataParallel: ranks were handed different values for parameter "
                     "'transformer.wte.weight': rank 1's differs from rank 0's"),
              std::string::npos)
        << e;
}

}  // namespace
}  // namespace artel::parallel
