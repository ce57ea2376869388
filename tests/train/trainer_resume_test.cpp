// Resuming a model of the user's own through train::Trainer: another
// architecture or optimizer is refused before a weight is touched, and
// leaves every file of the run as it was; checkpoints that are all damaged
// are refused rather than restarted over; an empty parameter resumes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "artel/core/error.h"
#include "artel/train/checkpoint.h"
#include "artel/train/trainer.h"
#include "user_model.h"

namespace artel::train {
namespace {

namespace fs = std::filesystem;

// TwoLayer and a parameter with no elements, which has nothing to write.
class WithEmptyParameter : public TwoLayer {
 public:
  WithEmptyParameter() { register_parameter("empty", Tensor::empty({0})); }
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
  std::string error_of(const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
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
