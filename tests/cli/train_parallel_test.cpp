// `artel train --nproc N` end to end, through the real program: data
// parallelism computes the update of one worker on the whole global batch
// (equivalence, --accum), checkpoints resume bit-for-bit, a killed worker is
// restarted from the newest checkpoint, a stopped one makes its peers time
// out naming it. Tiny models: every run takes well under a second; the
// faults are injected deterministically (ARTEL_TEST_FAULT, train_command.cpp).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "artel/nn/safetensors.h"

namespace {

namespace fs = std::filesystem;

struct Result {
  int code = -1;
  std::string out, err;
  double seconds = 0;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

constexpr const char* kGpt =
    "--n-layer 1 --n-head 2 --n-embd 16 --block-size 8 --eval-batches 1 --generate 0 --threads 1 "
    "--data-order sequential --seed 3";
constexpr const char* kMlp = "--model mlp --eval-batches 1 --threads 1 --data-order sequential --seed 3 --lr 0.05";

class TrainParallel : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("artel_train_par_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `[ENV] artel train ARGS` from the temp dir, never longer than two minutes.
  Result train(const std::string& args, const std::string& env = "", const std::string& prefix = "") {
    std::string cmd = "cd " + dir_.string() + " && " + env + " timeout 120 " + prefix + ARTEL_BINARY + " train " +
                      args + " >" + (dir_ / "stdout").string() + " 2>" + (dir_ / "stderr").string();
    auto t0 = std::chrono::steady_clock::now();
    int status = std::system(cmd.c_str());
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir_ / "stdout"), slurp(dir_ / "stderr"), s};
  }
  std::string out(const std::string& name) const { return " --out " + (dir_ / name).string(); }

  std::vector<double> losses(const std::string& run) const {
    std::ifstream in(dir_ / run / "metrics.jsonl");
    std::vector<double> l;
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line);
      if (j.contains("loss")) l.push_back(j["loss"].get<double>());
    }
    return l;
  }

  // The largest |a - b| over every weight of the two runs' final.safetensors.
  double max_weight_diff(const std::string& a, const std::string& b) const {
    auto fa = artel::nn::read_safetensors((dir_ / a / "final.safetensors").string());
    auto fb = artel::nn::read_safetensors((dir_ / b / "final.safetensors").string());
    EXPECT_EQ(fa.tensors.size(), fb.tensors.size());
    double worst = 0;
    for (const auto& [name, t] : fa.tensors) {
      std::vector<float> va = t.to_vector(), vb = fb.tensors.at(name).to_vector();
      EXPECT_EQ(va.size(), vb.size()) << name;
      for (size_t i = 0; i < va.size() && i < vb.size(); ++i) worst = std::max(worst, double(std::fabs(va[i] - vb[i])));
    }
    return worst;
  }

  // Same per-step losses (float rounding) and final weights within `tol`; prints the largest difference.
  void expect_same_run(const std::string& a, const std::string& b, double tol = 1e-5) {
    std::vector<double> la = losses(a), lb = losses(b);
    ASSERT_EQ(la.size(), lb.size()) << a << " vs " << b;
    ASSERT_FALSE(la.empty());
    for (size_t i = 0; i < la.size(); ++i) EXPECT_NEAR(la[i], lb[i], 1e-5 * std::fabs(la[i]) + 1e-6) << "step " << i + 1;
    double d = max_weight_diff(a, b);
    std::cout << "[ equivalence ] " << a << " vs " << b << ": max |weight difference| " << d << "\n";
    EXPECT_LE(d, tol) << a << " vs " << b;
  }

  void expect_identical_run(const std::string& a, const std::string& b) {
    EXPECT_EQ(losses(a), losses(b)) << a << " vs " << b;
    EXPECT_EQ(max_weight_diff(a, b), 0.0) << a << " vs " << b;
  }

  void ok(const Result& r) { ASSERT_EQ(r.code, 0) << r.out << r.err; }

  fs::path dir_;
};

TEST_F(TrainParallel, GptWorkersAndAccumulationEqualOneWorkerOnTheGlobalBatch) {
  std::string g = std::string(kGpt) + " --steps 4";
  ok(train(g + " --batch-size 8" + out("one")));
  Result two = train(g + " --batch-size 4 --nproc 2" + out("two"));
  ok(two);
  EXPECT_NE(two.out.find("[0]   run    4 steps of 4x8 tokens per worker x 2 worker(s) = global batch 8"),
            std::string::npos) << two.out;
  EXPECT_EQ(two.out.find("[1] "), std::string::npos) << "only rank 0 prints:\n" << two.out;
  EXPECT_NE(two.out.find("sync"), std::string::npos) << two.out;
  ok(train(g + " --batch-size 2 --nproc 4" + out("four")));
  ok(train(g + " --batch-size 4 --accum 2" + out("accum")));
  ok(train(g + " --batch-size 2 --accum 2 --nproc 2" + out("two_accum")));
  expect_same_run("one", "two");
  expect_same_run("one", "four");
  expect_same_run("one", "accum");
  expect_same_run("one", "two_accum");
  std::ifstream in(dir_ / "two" / "metrics.jsonl");
  std::string first;
  std::getline(in, first);
  auto j = nlohmann::json::parse(first);
  EXPECT_GT(j["t_comp_ms"].get<double>(), 0);
  EXPECT_GE(j["t_sync_ms"].get<double>(), 0);
  EXPECT_FALSE(fs::exists(dir_ / "one" / "checkpoints"));
}

TEST_F(TrainParallel, MlpWorkersEqualOneWorkerOnTheGlobalBatch) {
  std::string m = std::string(kMlp) + " --steps 3";
  ok(train(m + " --batch-size 32" + out("one")));
  ok(train(m + " --batch-size 16 --nproc 2" + out("two")));
  ok(train(m + " --batch-size 8 --nproc 4" + out("four")));
  ok(train(m + " --batch-size 16 --accum 2" + out("accum")));
  expect_same_run("one", "two");
  expect_same_run("one", "four");
  expect_same_run("one", "accum");
}

#ifdef ARTEL_MPIEXEC
TEST_F(TrainParallel, MpiWorkersEqualOneWorkerOnTheGlobalBatch) {
  std::string mpirun = std::string(ARTEL_MPIEXEC) + " --allow-run-as-root --oversubscribe -np ";
  ok(train(std::string(kGpt) + " --steps 3 --batch-size 8" + out("gpt1")));
  ok(train(std::string(kGpt) + " --steps 3 --batch-size 4 --backend mpi" + out("gpt2"), "", mpirun + "2 "));
  ok(train(std::string(kMlp) + " --steps 3 --batch-size 32" + out("mlp1")));
  ok(train(std::string(kMlp) + " --steps 3 --batch-size 8 --backend mpi" + out("mlp4"), "", mpirun + "4 "));
  expect_same_run("gpt1", "gpt2");
  expect_same_run("mlp1", "mlp4");
}
#endif

TEST_F(TrainParallel, ResumedRunIsIdenticalToAnUninterruptedOne) {
  std::string g = std::string(kGpt) + " --steps 6 --batch-size 4 --nproc 2 --checkpoint-every 2 --dropout 0.1";
  ok(train(g + out("whole")));
  // The same run, killed right after step 3 (its checkpoint of step 2 is the newest): no restarts.
  Result dead = train(g + out("cut"), "ARTEL_TEST_FAULT=kill@0:3");
  EXPECT_NE(dead.code, 0);
  EXPECT_NE(dead.err.find("worker 0 was killed by signal SIGKILL"), std::string::npos) << dead.err;
  EXPECT_TRUE(fs::exists(dir_ / "cut" / "checkpoints" / "ckpt-00000002.artel"));
  Result resumed = train(g + " --resume" + out("cut"));
  ok(resumed);
  EXPECT_NE(resumed.out.find("resuming from"), std::string::npos) << resumed.out;
  EXPECT_NE(resumed.out.find("ckpt-00000002.artel (step 2)"), std::string::npos) << resumed.out;
  expect_identical_run("whole", "cut");
  // keep-checkpoints 3 by default: steps 2, 4, 6 of the 3 written after the cut.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "cut" / "checkpoints"), fs::directory_iterator()), 3);
}

TEST_F(TrainParallel, KilledWorkerIsRestartedFromTheNewestCheckpoint) {
  std::string m = std::string(kMlp) + " --steps 6 --batch-size 16 --nproc 2 --checkpoint-every 2 --keep-checkpoints 2";
  ok(train(m + out("whole")));
  Result r = train(m + " --max-restarts 1" + out("killed"), "ARTEL_TEST_FAULT=kill@1:3");
  ok(r);
  EXPECT_NE(r.err.find("worker 1 was killed by signal SIGKILL"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("restarting all 2 workers"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("resuming from"), std::string::npos) << r.out;
  expect_identical_run("whole", "killed");
}

TEST_F(TrainParallel, StoppedWorkerMakesItsPeerTimeOutNamingIt) {
  Result r = train(std::string(kMlp) + " --steps 6 --batch-size 16 --nproc 2 --timeout 3" + out("run"),
                   "ARTEL_TEST_FAULT=stop@1:2");
  EXPECT_NE(r.code, 0);
  EXPECT_LT(r.seconds, 30);
  EXPECT_NE(r.err.find("rank(s) [1]"), std::string::npos) << r.err;  // the op and the stopped rank
  EXPECT_NE(r.err.find("worker 0 exited with status 1"), std::string::npos) << r.err;
}

TEST_F(TrainParallel, CorruptNewestCheckpointFallsBackToThePreviousOne) {
  std::string m = std::string(kMlp) + " --batch-size 16 --checkpoint-every 2";
  ok(train(m + " --steps 6" + out("whole")));
  ok(train(m + " --steps 4" + out("cut")));
  fs::path newest = dir_ / "cut" / "checkpoints" / "ckpt-00000004.artel";
  fs::resize_file(newest, fs::file_size(newest) / 2);
  Result r = train(m + " --steps 6 --resume" + out("cut"));
  ok(r);
  EXPECT_NE(r.out.find("ckpt-00000004.artel"), std::string::npos) << r.out;  // reported
  EXPECT_NE(r.out.find("resuming from " + (dir_ / "cut" / "checkpoints" / "ckpt-00000002.artel").string()),
            std::string::npos) << r.out;
  expect_identical_run("whole", "cut");
}

TEST_F(TrainParallel, CheckpointOfAnotherModelOrWorldSizeIsRefused) {
  std::string g = std::string(kGpt) + " --batch-size 4 --checkpoint-every 2 --steps 2";
  ok(train(g + out("run")));
  Result wider = train(g + " --steps 4 --resume --n-embd 32" + out("run"));
  EXPECT_NE(wider.code, 0);
  EXPECT_NE(wider.err.find("model config n_embd 16 in the checkpoint, 32 in this run"), std::string::npos) << wider.err;
  Result more = train(g + " --steps 4 --resume --nproc 2" + out("run"));
  EXPECT_NE(more.code, 0);
  EXPECT_NE(more.err.find("world size 1 in the checkpoint, 2 in this run"), std::string::npos) << more.err;
}

TEST_F(TrainParallel, MpiBackendWithNprocPointsAtMpirun) {
  Result r = train(std::string(kGpt) + " --steps 1 --nproc 2 --backend mpi" + out("run"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("mpirun -np 2 artel train --backend mpi"), std::string::npos) << r.err;
}

}  // namespace
