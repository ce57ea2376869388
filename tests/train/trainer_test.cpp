// The training loop on a tiny GPT over a small text file: the strategy seam,
// determinism, stopping on a non-finite loss; and a user's own model and
// data through the same loop.
#include "artel/train/trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "artel/comm/thread_group.h"
#include "artel/core/error.h"
#include "artel/parallel/mesh_groups.h"
#include "artel/train/data_parallel.h"
#include "artel/train/fully_sharded_strategy.h"
#include "artel/nn/safetensors.h"
#include "artel/train/model_mesh.h"
#include "artel/data/dataset.h"
#include "artel/nn/activations.h"
#include "artel/nn/linear.h"
#include "user_model.h"

namespace artel::train {
namespace {

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One file per test process: ctest runs tests of this fixture in parallel.
    text_ = ::testing::TempDir() + "artel_trainer_test_" + std::to_string(::getpid()) + ".txt";
    std::ofstream f(text_);
    for (int i = 0; i < 200; ++i) f << "to be or not to be, that is the question " << i << "\n";
  }
  void TearDown() override { std::filesystem::remove(text_); }

  TrainConfig tiny() const {
    TrainConfig c = default_config("gpt");
    c.data = text_;
    c.n_layer = 1, c.n_head = 2, c.n_embd = 16, c.block_size = 8, c.batch_size = 4;
    c.steps = 4, c.threads = 1, c.generate = 0, c.eval_batches = 2;
    return c;
  }
  RunOptions quiet() {
    RunOptions r;
    r.out = &log_;
    r.write_files = false;
    return r;
  }

  std::string text_;
  std::ostringstream log_;
};

// A strategy that counts what the loop asks of it and shifts the reported loss.
struct CountingStrategy : Strategy {
  int syncs = 0, steps = 0, built = 0;
  std::vector<double> local;
  nn::NamedParameters build(nn::Model& m, const data::Dataset& d, uint64_t seed, const std::string& init) override {
    return ++built, Strategy::build(m, d, seed, init);
  }
  double sync_gradients() override { return ++syncs, 0.001; }
  double reported_loss(double l) override { return local.push_back(l), l + 1.0; }
  double optimizer_step(optim::Optimizer& o) override { return ++steps, Strategy::optimizer_step(o); }
};

TEST_F(TrainerTest, TheStrategySeesEveryStepAndShapesTheReportedLoss) {
  CountingStrategy strategy;
  Trainer t(tiny(), quiet(), &strategy);
  RunSummary s = t.run();
  EXPECT_EQ(strategy.built, 1);
  EXPECT_EQ(strategy.syncs, 4);
  EXPECT_EQ(strategy.steps, 4);
  ASSERT_EQ(strategy.local.size(), 4u);
  for (size_t i = 0; i < strategy.local.size(); ++i)
    EXPECT_DOUBLE_EQ(s.losses[i], strategy.local[i] + 1.0);  // the reported loss
  ASSERT_TRUE(s.final_eval);
  EXPECT_GT(s.final_eval->targets, 0);
}

// The straggler knob's hook (Note [Test slowdown]) runs once per step, after
// forward and backward and before the gradients are synchronised, with the
// CPU time they took; the fault-injection hook after the whole step.
TEST_F(TrainerTest, TheComputeHookRunsBeforeTheGradientsLeave) {
  struct Recording : CountingStrategy {
    std::vector<std::string>* events = nullptr;
    double sync_gradients() override { return events->push_back("sync"), CountingStrategy::sync_gradients(); }
  } strategy;
  std::vector<std::string> events;
  strategy.events = &events;
  RunOptions run = quiet();
  double took = 0;
  run.after_compute = [&](int64_t k, double seconds) {
    events.push_back("compute " + std::to_string(k));
    took += seconds;
  };
  run.after_step = [&](int64_t k) { events.push_back("step " + std::to_string(k)); };
  TrainConfig c = tiny();
  c.steps = 2;
  Trainer(c, run, &strategy).run();
  EXPECT_EQ(events, (std::vector<std::string>{"compute 1", "sync", "step 1", "compute 2", "sync", "step 2"}));
  EXPECT_GT(took, 0.0);
}

TEST_F(TrainerTest, SameConfigSameLosses) {
  RunSummary a = Trainer(tiny(), quiet()).run();
  RunSummary b = Trainer(tiny(), quiet()).run();
  EXPECT_EQ(a.losses, b.losses);
  TrainConfig other = tiny();
  other.seed = 7;
  EXPECT_NE(Trainer(other, quiet()).run().losses, a.losses);
  EXPECT_LT(a.losses.back(), a.losses.front());  // it learns
}

TEST_F(TrainerTest, EpochsSetTheStepCount) {
  TrainConfig c = tiny();
  c.epochs = 1;
  Trainer t(c, quiet());
  // (n_train − 1) / T blocks, batches of 4: one epoch
  EXPECT_GT(t.total_steps(), 4);
  EXPECT_EQ(t.items_per_step(), 4 * 8);
}

TEST_F(TrainerTest, NonFiniteLossStopsBeforeTheUpdate) {
  TrainConfig c = tiny();
  struct Diverged : Strategy {
    double reported_loss(double) override { return NAN; }  // as if a worker diverged
  } diverged;
  Trainer bad(c, quiet(), &diverged);
  auto before = bad.model().state_dict().begin()->second.clone().to_vector();
  try {
    bad.run();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("loss is NaN at step 1;"), std::string::npos) << e.what();
  }
  EXPECT_EQ(bad.model().state_dict().begin()->second.to_vector(), before);
}

TEST_F(TrainerTest, SamplesDecodedText) {
  TrainConfig c = tiny();
  Trainer t(c, quiet());
  std::string s = t.sample(20);
  EXPECT_EQ(s.size(), 20u);
  for (char ch : s) EXPECT_NE(std::string("to beorniquesaht,0123456789\n").find(ch), std::string::npos) << ch;
}

TEST_F(TrainerTest, ModelMustFitTheData) {
  TrainConfig c = tiny();
  c.model = "mlp";
  c.batch_size = 4;
  EXPECT_THROW(Trainer(c, quiet()), Error);
}

// A model the library does not know: y = fc2(relu(fc1(x))), its plan two pieces.
TEST_F(TrainerTest, AUsersOwnModelAndDataTrainThroughTheLoop) {
  TrainConfig c = default_config("mlp");
  c.model = "two-layer", c.steps = 60, c.batch_size = 32, c.threads = 1, c.eval_batches = 0, c.lr = 0.1;
  c.data_order = "sequential";
  Trainer t(c, std::make_unique<TwoLayer>(), argmax_rows(512), quiet());
  EXPECT_EQ(t.model().num_parameters(), 4 * 16 + 16 + 16 * 3 + 3);
  EXPECT_EQ(t.items_per_step(), 32);
  RunSummary s = t.run();
  EXPECT_LT(s.losses.back(), 0.6 * s.losses.front()) << "it learns";
  ASSERT_TRUE(s.final_eval);
  EXPECT_EQ(s.final_eval->targets, 128);
  EXPECT_GT(*s.final_eval->val_accuracy, 0.6);
  EXPECT_NE(log_.str().find("artel train: two-layer, 131 parameters"), std::string::npos) << log_.str();
  // The same run again: the same losses (weights drawn from cfg.seed, batches in order).
  EXPECT_EQ(Trainer(c, std::make_unique<TwoLayer>(), argmax_rows(512), quiet()).run().losses, s.losses);
}

// The data-parallel strategy of ZeRO stage `zero` on a thread rank's group:
// DataParallelStrategy with the optimizer (1) and the gradients (2)
// sharded, or FullyShardedStrategy (3).
std::unique_ptr<Strategy> zero_stage(comm::ProcessGroup& pg, const TrainConfig& c, int zero) {
  auto world = std::shared_ptr<comm::ProcessGroup>(&pg, [](comm::ProcessGroup*) {});
  if (zero == 3) return std::make_unique<FullyShardedStrategy>(world, parallel::FsdpOptions{});
  parallel::DdpOptions ddp = c.ddp_options();
  ddp.shard_optimizer = zero >= 1, ddp.shard_gradients = zero >= 2;
  return std::make_unique<DataParallelStrategy>(world, ddp);
}

// Every data-parallel strategy takes a user's own model as it takes the
// built-in ones: ZeRO 0 (DDP), 1 and 2 (DataParallelStrategy with the
// optimizer, then the gradients, sharded) and 3 (FullyShardedStrategy), each
// on 2 workers of 16 rows, end with one worker's weights on 32 (the weights
// file rank 0 writes, gathered for ZeRO 3).
TEST_F(TrainerTest, AUsersOwnModelUnderEachZeroStageEqualsOneWorker) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("artel_user_zero_" + std::to_string(::getpid()));
  TrainConfig c = default_config("mlp");
  c.model = "two-layer", c.steps = 12, c.threads = 1, c.lr = 0.1, c.eval_batches = 1, c.data_order = "sequential";
  c.optimizer = "adamw", c.momentum = 0, c.weight_decay = 0.01;  // AdamW: its two moments are what ZeRO shards
  RunOptions run = quiet();
  run.write_files = true;
  auto weights = [](const std::filesystem::path& out) {
    std::map<std::string, std::vector<float>> w;
    for (const auto& [name, t] : nn::read_safetensors((out / "final.safetensors").string()).tensors) w[name] = t.to_vector();
    return w;
  };
  TrainConfig alone = c;
  alone.batch_size = 32, alone.out = (dir / "one").string();
  Trainer(alone, std::make_unique<TwoLayer>(), argmax_rows(512), run).run();
  const std::map<std::string, std::vector<float>> one = weights(alone.out);
  for (int zero = 0; zero <= 3; ++zero) {
    TrainConfig dp = c;
    dp.batch_size = 16, dp.zero = zero, dp.out = (dir / ("zero" + std::to_string(zero))).string();
    comm::spawn_threads(2, [&](comm::ProcessGroup& pg) {
      const std::unique_ptr<Strategy> strategy = zero_stage(pg, dp, zero);
      Trainer(dp, std::make_unique<TwoLayer>(), argmax_rows(512), run, strategy.get()).run();
    });
    const std::map<std::string, std::vector<float>> sharded = weights(dp.out);
    ASSERT_EQ(sharded.size(), one.size()) << "zero " << zero;
    double worst = 0;
    for (const auto& [name, w] : one) {
      ASSERT_EQ(sharded.at(name).size(), w.size()) << name;
      for (size_t i = 0; i < w.size(); ++i) worst = std::max(worst, double(std::fabs(w[i] - sharded.at(name)[i])));
    }
    EXPECT_LE(worst, 1e-6) << "zero " << zero;
  }
  std::filesystem::remove_all(dir);
}

// A user's model that counts the batches it evaluated (its forwards in eval mode).
class EvalCountingTwoLayer : public TwoLayer {
 public:
  explicit EvalCountingTwoLayer(int64_t* evaluated) : evaluated_(evaluated) {}
  Variable forward(const Tensor& input) override {
    if (!is_training()) ++*evaluated_;
    return TwoLayer::forward(input);
  }

 private:
  int64_t* evaluated_;
};

// Data-parallel replicas split the validation batches (ZeRO 0, 1 and 3):
// of 7 batches of 16 rows, worker 0 evaluates 4 and worker 1 the other 3 —
// under ZeRO 3 with a fourth forward left out of the sums, as its forwards
// gather the weights with worker 0's — and both report what one worker on
// the same weights reports over all 7.
TEST_F(TrainerTest, DataParallelReplicasSplitTheValidationBatches) {
  TrainConfig c = default_config("mlp");
  c.model = "two-layer", c.steps = 6, c.threads = 1, c.lr = 0.1, c.eval_batches = 7, c.eval_every = 3;
  c.data_order = "sequential", c.batch_size = 16;
  for (int zero : {0, 1, 3}) {
    SCOPED_TRACE(::testing::Message() << "zero " << zero);
    int64_t forwards[2] = {0, 0};
    std::optional<EvalResult> results[2], alone[2];
    comm::spawn_threads(2, [&](comm::ProcessGroup& pg) {
      const std::unique_ptr<Strategy> strategy = zero_stage(pg, c, zero);
      const int r = pg.rank();
      auto model = std::make_unique<EvalCountingTwoLayer>(&forwards[r]);
      nn::Model& trained = *model;
      std::ostringstream log;
      RunOptions run;
      run.out = &log;
      run.write_files = false;
      Trainer trainer(c, std::move(model), argmax_rows(512), run, strategy.get());
      results[r] = trainer.run().final_eval;
      const int64_t split = forwards[r];
      // All 7 batches on each worker (under ZeRO 3 both gather alike).
      alone[r] = evaluate(trained, *argmax_rows(512), {.batch_size = 16, .max_batches = 7, .accuracy = true});
      forwards[r] = split;
    });
    EXPECT_EQ(forwards[0], 2 * 4);  // at steps 3 and 6
    EXPECT_EQ(forwards[1], 2 * (zero == 3 ? 4 : 3));
    for (int r = 0; r < 2; ++r) {
      SCOPED_TRACE(::testing::Message() << "rank " << r);
      ASSERT_TRUE(results[r] && alone[r]);
      EXPECT_EQ(alone[r]->targets, 7 * 16);
      EXPECT_EQ(results[r]->targets, 7 * 16);
      EXPECT_NEAR(results[r]->val_loss, alone[r]->val_loss, 1e-12 * alone[r]->val_loss);
      EXPECT_EQ(*results[r]->val_accuracy, *alone[r]->val_accuracy);
    }
  }
}

// A model of 3 outputs on data of 5 classes is named at the first step: the
// rows' targets reach only 2, so cross-entropy alone would have trained it
// without a word, a model that can never predict classes 3 and 4.
TEST_F(TrainerTest, AModelWithFewerOutputsThanTheDataHasClassesIsNamed) {
  TrainConfig c = default_config("mlp");
  c.model = "two-layer", c.steps = 2, c.batch_size = 8, c.threads = 1, c.eval_batches = 0;
  try {
    Trainer(c, std::make_unique<TwoLayer>(), argmax_rows(64, 5), quiet()).run();
    ADD_FAILURE() << "3 outputs trained on 5 classes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the model gives 3 logits a row, but the data has 5 classes"), std::string::npos)
        << e.what();
  }
  TwoLayer model;  // evaluation alone, as a program of the user's own may call it
  nn::materialize(model, 1);
  try {
    evaluate(model, *argmax_rows(64, 5), {.batch_size = 8});
    ADD_FAILURE() << "3 outputs evaluated on 5 classes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the model gives 3 logits a row, but the data has 5 classes"), std::string::npos)
        << e.what();
  }
  // The mesh (tensor and pipeline parallelism) checks the stage that computes the loss.
  std::vector<std::string> said(2);
  comm::spawn_threads(2, [&](comm::ProcessGroup& pg) {
    auto world = std::shared_ptr<comm::ProcessGroup>(&pg, [](comm::ProcessGroup*) {});
    ModelMesh mesh(c, parallel::make_mesh_groups(world, 1, 1));
    try {
      Trainer(c, std::make_unique<TwoLayer>(), argmax_rows(64, 5), quiet(), &mesh).run();
    } catch (const Error& e) {
      said[static_cast<size_t>(pg.rank())] = e.what();
    }
  });
  for (const std::string& e : said)
    EXPECT_NE(e.find("the model gives 3 logits a row, but the data has 5 classes"), std::string::npos) << e;
}

// A program of the user's own under mpirun reads its flags per rank, as
// `artel train` does: ranks started differently are named before the first
// step (a differing --lr trained the replicas apart without a word), and a
// mesh whose groups were made for another layout than the config's is
// refused with both.
TEST_F(TrainerTest, RanksStartedDifferentlyAreNamedThroughTheLibraryToo) {
  TrainConfig c = default_config("mlp");
  c.model = "two-layer", c.steps = 2, c.batch_size = 8, c.threads = 1, c.eval_batches = 0, c.lr = 0.1;
  RunOptions run{.out = &log_, .write_files = false, .sample = false, .set_threads = false};
  std::vector<std::string> said(2);
  comm::spawn_threads(2, [&](comm::ProcessGroup& pg) {
    auto world = std::shared_ptr<comm::ProcessGroup>(&pg, [](comm::ProcessGroup*) {});
    TrainConfig mine = c;
    if (pg.rank() == 1) mine.lr = 0.2;
    DataParallelStrategy strategy(world, {});
    try {
      Trainer t(mine, std::make_unique<TwoLayer>(), argmax_rows(64), run, &strategy);
    } catch (const Error& e) {
      said[static_cast<size_t>(pg.rank())] = e.what();
    }
  });
  for (const std::string& e : said)
    EXPECT_NE(e.find("rank 1 was started with --lr 0.2, rank 0 with --lr 0.1"), std::string::npos) << e;

  comm::spawn_threads(2, [&](comm::ProcessGroup& pg) {
    auto world = std::shared_ptr<comm::ProcessGroup>(&pg, [](comm::ProcessGroup*) {});
    TrainConfig mesh = c;
    mesh.pp = 2;
    try {
      ModelMesh m(mesh, parallel::make_mesh_groups(world, 1, 1));
      ADD_FAILURE() << "a mesh of pp 2 accepted groups made for pp 1";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("ModelMesh: the config asks for pp 2 x tp 1, but the groups were made for "
                                           "pp 1 x tp 1"),
                std::string::npos)
          << e.what();
    }
  });
}

// The memory report: parameters and gradients of fp32 weights (4 bytes each),
// AdamW's two moments (8), the step's transient working set, and the OS's
// peak — printed as a table and written as the last line of metrics.jsonl.
TEST_F(TrainerTest, TheMemoryReportCountsEachKindOfBytes) {
  TrainConfig c = tiny();
  c.out = ::testing::TempDir() + "artel_memory_report_" + std::to_string(::getpid());
  RunOptions run = quiet();
  run.write_files = true;
  Trainer t(c, run);
  t.run();
  const int64_t n = t.model().num_parameters();
  std::ifstream f(c.out + "/metrics.jsonl");
  std::string line, last;
  while (std::getline(f, line)) last = line;
  const nlohmann::json m = nlohmann::json::parse(last).at("memory").at(0);
  EXPECT_EQ(m.at("parameters").get<int64_t>(), 4 * n);
  EXPECT_EQ(m.at("gradients").get<int64_t>(), 4 * n);
  EXPECT_EQ(m.at("optimizer_state").get<int64_t>(), 8 * n);
  EXPECT_GT(m.at("activations").get<int64_t>(), 0);
  EXPECT_EQ(m.at("communication").get<int64_t>(), 0);  // alone: no process group
  EXPECT_GT(m.at("peak_resident").get<int64_t>(), m.at("parameters").get<int64_t>());
  EXPECT_NE(log_.str().find("rank  parameters  gradients  optimizer  activations  communication"), std::string::npos)
      << log_.str();
  std::filesystem::remove_all(c.out);
}

// Note [Gradients in place]: a worker alone writes each step's gradients into
// one buffer that outlives the steps, each parameter's after the last one's,
// not into tensors its backward allocates among the activations.
TEST_F(TrainerTest, AloneTheGradientsAreWrittenIntoOneBuffer) {
  Trainer t(tiny(), quiet());
  t.run();
  const float* next = nullptr;
  for (const auto& [name, p] : t.model().named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    if (next) {
      EXPECT_EQ(p.grad().data<float>(), next) << name;
    }
    next = p.grad().data<float>() + p.numel();
  }
}

TEST(TensorDataset, RowsThatDoNotFitAreNamed) {
  auto rows = [](Shape x, Shape y, int64_t cls = 0) {
    Tensor ty = Tensor::zeros(y, DType::i64);
    if (ty.numel()) ty.data<int64_t>()[0] = cls;
    return data::TensorDataset(Tensor::zeros(x), ty, Tensor::zeros({1, 2}), Tensor::zeros({1}, DType::i64), 2, "mine");
  };
  EXPECT_THROW(rows({3}, {3}), Error);
  try {
    rows({3, 2}, {4});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dataset mine: train y must be (3) int64, got [4]"), std::string::npos) << e.what();
  }
  try {
    rows({3, 2}, {3}, 2);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train class 2 at row 0 is outside [0, 2)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace artel::train
