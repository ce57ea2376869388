// The fixture of the end-to-end training tests: runs the real `artel train`
// in a fresh temporary directory per test and compares what runs wrote
// (per-step losses from metrics.jsonl, weights from final.safetensors).
#pragma once

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "artel/nn/safetensors.h"

namespace artel_test {

namespace fs = std::filesystem;

// The tiny GPT and the MLP that the data-parallel and parameter-server runs train.
constexpr const char* kGpt =
    "--n-layer 1 --n-head 2 --n-embd 16 --block-size 8 --eval-batches 1 --generate 0 --threads 1 "
    "--data-order sequential --seed 3";
constexpr const char* kMlp = "--model mlp --eval-batches 1 --threads 1 --data-order sequential --seed 3 --lr 0.05";

struct Result {
  int code = -1;
  std::string out, err;
  double seconds = 0;
};

// The first line of a run's metrics.jsonl that holds `key`, its value.
inline nlohmann::json metrics_entry(const fs::path& metrics, const char* key) {
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.contains(key)) return j[key];
  }
  return {};
}

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class TrainRuns : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("artel_train_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `[ENV] artel train ARGS` from the temp dir, never longer than two minutes.
  Result train(const std::string& args, const std::string& env = "", const std::string& prefix = "") {
    return artel("train " + args, env, prefix);
  }
  // Runs `[ENV] [PREFIX] artel ARGS` from the temp dir, never longer than two minutes.
  Result artel(const std::string& args, const std::string& env = "", const std::string& prefix = "") {
    std::string cmd = "cd " + dir_.string() + " && " + env + " timeout 120 " + prefix + ARTEL_BINARY + " " + args +
                      " >" + (dir_ / "stdout").string() + " 2>" + (dir_ / "stderr").string();
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

}  // namespace artel_test
