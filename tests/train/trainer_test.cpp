// The training loop on a tiny GPT over a small text file: the seams data
// parallelism plugs into, determinism, and stopping on a non-finite loss.
#include "artel/train/trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "artel/core/error.h"

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
  nn::NamedParameters build(models::Model& m, const data::Dataset& d, uint64_t seed, const std::string& init) override {
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

}  // namespace
}  // namespace artel::train
