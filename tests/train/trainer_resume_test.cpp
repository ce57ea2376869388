// Resuming a model of the user's own through train::Trainer: another
// architecture or optimizer is refused before a weight is touched, and
// leaves every file of the run as it was; checkpoints that are all damaged
// are refused rather than restarted over; an empty parameter resumes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "artel/autograd/ops.h"
#include "artel/comm/thread_group.h"
#include "artel/core/error.h"
#include "artel/parallel/mesh_groups.h"
#include "artel/train/checkpoint.h"
#include "artel/nn/init.h"
#include "artel/nn/safetensors.h"
#include "artel/train/checkpoint_export.h"
#include "artel/train/model_mesh.h"
#include "artel/train/trainer.h"
#include "artel/nn/layer.h"
#include "artel/nn/linear.h"
#include "error_of.h"
#include "user_model.h"

namespace artel::train {
namespace {

namespace fs = std::filesystem;
using test_support::error_of;

// TwoLayer and a parameter with no elements, which has nothing to write.
class WithEmptyParameter : public TwoLayer {
 public:
  WithEmptyParameter() { register_parameter("empty", Tensor::empty({0})); }
};

// TwoLayer whose ReLU keeps a count of its calls (int64) and a running mean
// of its input (float32): buffers, state that is not trained.
class Counting : public nn::Layer {
 public:
  Counting() {
    calls_ = register_buffer("calls", Tensor::zeros({1}, DType::i64));
    mean_ = register_buffer("mean", Tensor::zeros({2}));
  }
  autograd::Variable forward(const autograd::Variable& x) override {
    ++calls_.data<int64_t>()[0];
    const std::vector<float> v = x.value().to_vector();
    for (size_t i = 0; i < v.size(); ++i) mean_.data<float>()[i % 2] = 0.9f * mean_.data<float>()[i % 2] + 0.1f * v[i];
    return autograd::relu(x);
  }

 private:
  Tensor calls_, mean_;
};
class WithBuffers : public nn::Model {
 public:
  WithBuffers() {
    fc1_ = register_module("fc1", std::make_shared<nn::Linear>(4, 16));
    count_ = register_module("count", std::make_shared<Counting>());
    fc2_ = register_module("fc2", std::make_shared<nn::Linear>(16, 3));
    set_plan({.pieces = {nn::layer_piece("fc1", *fc1_), nn::layer_piece("count", *count_),
                         nn::layer_piece("fc2", *fc2_)}});
  }

 private:
  std::shared_ptr<nn::Linear> fc1_, fc2_;
  std::shared_ptr<Counting> count_;
};

class TrainerResumeTest : public ::testing::Test {
 protected:
  void SetUp() override { out_ = ::testing::TempDir() + "artel_resume_test_" + std::to_string(::getpid()); }
  void TearDown() override { fs::remove_all(out_); }

  TrainConfig config(int64_t steps) const {
    TrainConfig c = default_config("mlp");
    c.model = "two-layer", c.out = out_, c.steps = steps, c.batch_size = 8, c.threads = 1, c.eval_batches = 0;
    c.optimizer = "sgd", c.momentum = 0.9, c.lr = 0.1, c.checkpoint_every = 2;
    return c;
  }
  RunOptions run(bool resume) { return {.out = &log_, .evaluate = false, .set_threads = false, .resume = resume}; }
  // What the run wrote: every file's bytes, by path.
  std::map<std::string, std::string> files() const {
    std::map<std::string, std::string> all;
    for (const auto& e : fs::recursive_directory_iterator(out_))
      if (e.is_regular_file()) {
        std::ifstream f(e.path(), std::ios::binary);
        all[e.path().string()] = std::string(std::istreambuf_iterator<char>(f), {});
      }
    return all;
  }

  std::string out_;
  std::ostringstream log_;
};

// A wider layer and another optimizer were found only while the weights were
// read in place: the run then started at step 1 on weights half the
// checkpoint's and wrote its own checkpoints over the old run's.
TEST_F(TrainerResumeTest, AnotherModelOrOptimizerIsRefusedTouchingNothing) {
  Trainer(config(4), std::make_unique<TwoLayer>(), argmax_rows(64), run(false)).run();
  const auto before = files();
  const std::string wider = error_of([&] {
    Trainer(config(8), std::make_unique<TwoLayer>(32), argmax_rows(64), run(true)).run();
  });
  EXPECT_NE(wider.find("was written by another model or optimizer: parameter 'fc1.bias' is [16] in the checkpoint, "
                       "[32] in this run; parameter 'fc1.weight' is [16,4] in the checkpoint, [32,4] in this run"),
            std::string::npos)
      << wider;
  TrainConfig adamw = config(8);
  adamw.optimizer = "adamw", adamw.momentum = 0;
  const std::string other = error_of([&] {
    Trainer(adamw, std::make_unique<TwoLayer>(), argmax_rows(64), run(true)).run();
  });
  EXPECT_NE(other.find("optimizer 'sgd' (state: momentum_buffer) in the checkpoint, 'adamw' (state: exp_avg "
                       "exp_avg_sq) in this run"),
            std::string::npos)
      << other;
  EXPECT_TRUE(files() == before) << "a file of the run changed";
}

// A restore that fails has written some weights: with no older checkpoint
// to overwrite them, the run refuses instead of training on the mix.
TEST_F(TrainerResumeTest, CheckpointsThatAreAllDamagedAreRefused) {
  Trainer(config(4), std::make_unique<TwoLayer>(), argmax_rows(64), run(false)).run();
  for (const char* step : {"ckpt-00000002", "ckpt-00000004"}) {
    const std::string shard = (fs::path(out_) / "checkpoints" / step / "rank-00000.artel").string();
    const uint64_t at = CheckpointFile(shard).find("optim/momentum_buffer.fc2.bias")->offset;  // the last tensor read
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(at));
    f.put('\x55');
  }
  const auto before = files();
  const std::string said = error_of([&] {
    Trainer(config(8), std::make_unique<TwoLayer>(), argmax_rows(64), run(true)).run();
  });
  EXPECT_NE(said.find("resume: no checkpoint in " + out_ + "/checkpoints could be restored, the newest complete one: "
                      "checkpoint " + out_ + "/checkpoints/ckpt-00000004"),
            std::string::npos)
      << said;
  EXPECT_TRUE(files() == before) << "a file of the run changed";
}

// Another seed or another data size resumes, but not through the batches
// the uninterrupted run would have seen: said in a line each.
TEST_F(TrainerResumeTest, AnotherSeedOrDataSizeIsSaid) {
  Trainer(config(2), std::make_unique<TwoLayer>(), argmax_rows(64), run(false)).run();
  TrainConfig c = config(4);
  c.seed = 7;
  Trainer(c, std::make_unique<TwoLayer>(), argmax_rows(96), run(true)).run();
  for (const std::string line : {"the checkpoint was trained with --seed 1337, this run draws its batches from --seed 7",
                                 "the checkpoint was trained on 64 training items, this run's data has 96"})
    EXPECT_NE(log_.str().find(line), std::string::npos) << log_.str();
}

// A parameter without elements had no part in the shard, and every
// checkpoint was skipped for it.
TEST_F(TrainerResumeTest, AnEmptyParameterResumesExactly) {
  Trainer(config(2), std::make_unique<WithEmptyParameter>(), argmax_rows(64), run(false)).run();
  Trainer resumed(config(4), std::make_unique<WithEmptyParameter>(), argmax_rows(64), run(true));
  resumed.run();
  EXPECT_NE(log_.str().find("resuming from"), std::string::npos) << log_.str();
  fs::remove_all(out_);
  Trainer straight(config(4), std::make_unique<WithEmptyParameter>(), argmax_rows(64), run(false));
  straight.run();
  const nn::StateDict a = resumed.model().state_dict(), b = straight.model().state_dict();
  for (const auto& [name, t] : b)
    EXPECT_EQ(std::memcmp(a.at(name).raw(), t.raw(), t.nbytes()), 0) << name;
}

// Buffers were left out of checkpoints: a resumed run went on from the
// model's initial counts and running means.
TEST_F(TrainerResumeTest, BuffersResumeExactly) {
  TrainConfig c = config(2);
  c.eval_batches = 0;
  Trainer(c, std::make_unique<WithBuffers>(), argmax_rows(64), run(false)).run();
  c.steps = 4;
  Trainer resumed(c, std::make_unique<WithBuffers>(), argmax_rows(64), run(true));
  resumed.run();
  fs::remove_all(out_);
  Trainer straight(c, std::make_unique<WithBuffers>(), argmax_rows(64), run(false));
  straight.run();
  const nn::StateDict a = resumed.model().state_dict(), b = straight.model().state_dict();
  EXPECT_EQ(b.at("count.calls").data<int64_t>()[0], 4);
  for (const auto& [name, t] : b)
    EXPECT_EQ(std::memcmp(a.at(name).raw(), t.raw(), t.nbytes()), 0) << name;
  // Exported with the weights, as final.safetensors holds them: the whole state dict loads.
  const std::string exported = out_ + "/exported.safetensors";
  export_weights(ShardedCheckpoint(out_ + "/checkpoints/ckpt-00000004"), exported);
  WithBuffers loaded;
  nn::materialize(loaded, 1);
  nn::load_weights(loaded, exported);
  EXPECT_EQ(loaded.state_dict().at("count.calls").data<int64_t>()[0], 4);
}

// Under a pipeline the stage that runs a buffer's piece writes it and reads
// it back: each rank's buffers after 2 + 2 steps are those of 4 straight.
TEST_F(TrainerResumeTest, BuffersResumeExactlyThroughAPipeline) {
  TrainConfig c = config(2);
  c.pp = 2, c.micro_batches = 2;
  std::vector<nn::StateDict> resumed(2), straight(2);
  auto train = [&](int64_t steps, bool resume, std::vector<nn::StateDict>* out) {
    comm::spawn_threads(2, [&](comm::ProcessGroup& pg) {
      auto world = std::shared_ptr<comm::ProcessGroup>(&pg, [](comm::ProcessGroup*) {});
      TrainConfig mine = c;
      mine.steps = steps;
      ModelMesh mesh(mine, parallel::make_mesh_groups(world, 2, 1));
      std::ostringstream quiet;
      Trainer t(mine, std::make_unique<WithBuffers>(), argmax_rows(64),
                {.out = &quiet, .evaluate = false, .set_threads = false, .resume = resume}, &mesh);
      t.run();
      if (out)
        for (auto& [name, b] : t.model().named_buffers()) (*out)[static_cast<size_t>(pg.rank())][name] = b.clone();
    });
  };
  train(2, false, nullptr);
  train(4, true, &resumed);
  fs::remove_all(out_);
  train(4, false, &straight);
  int64_t counted = 0;
  for (size_t r = 0; r < 2; ++r) {
    counted += straight[r].at("count.calls").data<int64_t>()[0];
    for (const auto& [name, t] : straight[r])
      EXPECT_EQ(std::memcmp(resumed[r].at(name).raw(), t.raw(), t.nbytes()), 0) << "rank " << r << ": " << name;
  }
  EXPECT_EQ(counted, 8) << "one stage ran count: 4 steps of 2 micro-batches";
}

// Checkpoints are files: with write_files off, checkpoint_every wrote none.
TEST_F(TrainerResumeTest, CheckpointsWithoutFilesAreRefused) {
  RunOptions r = run(false);
  r.write_files = false;
  EXPECT_NE(error_of([&] { Trainer(config(4), std::make_unique<TwoLayer>(), argmax_rows(64), r); })
                .find("Trainer: checkpoint_every 2 asks for checkpoints, but RunOptions::write_files is false"),
            std::string::npos);
}

}  // namespace
}  // namespace artel::train
