#include "artel/train/train_bench.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "artel/core/error.h"
#include "artel/core/memory_stats.h"

namespace artel::train {
namespace {

TEST(TrainBench, MedianAfterWarmupIsTheHarnessStatistic) {
  // sorted(t[warmup:])[len // 2], as torch_train/train.py computes it
  EXPECT_DOUBLE_EQ(median_after_warmup({100, 100, 3, 1, 2}, 2), 2);
  EXPECT_DOUBLE_EQ(median_after_warmup({9, 4, 1, 3, 2}, 1), 3);  // even count: the upper middle
  EXPECT_THROW(median_after_warmup({1, 2}, 2), Error);
}

TEST(TrainBench, AReplayKeepsItsScratchForTheNext) {
  // A scratch made afresh for every replay displaced the step's kept large
  // buffers (GemmReplay in train_bench.h): one replay holds its scratch from
  // call to call, grown only for larger products.
  std::vector<float> a(64 * 64, 1.0f), c(64 * 64);
  std::vector<kernels::GemmArgs> small, large;
  {
    kernels::GemmRecorder rec;
    kernels::gemm(false, false, 32, 32, 32, 1.0f, a.data(), a.data(), 0.0f, c.data());
    small = rec.calls();
  }
  {
    kernels::GemmRecorder rec;
    kernels::gemm(false, false, 64, 64, 64, 1.0f, a.data(), a.data(), 0.0f, c.data());
    large = rec.calls();
  }
  const int64_t before = live_tensor_bytes();
  {
    GemmReplay replay;
    replay.ms(large, 1);
    const int64_t held = live_tensor_bytes() - before;
    EXPECT_EQ(held, 3 * 64 * 64 * int64_t{sizeof(float)});  // a, b and c of the product
    replay.ms(small, 1);
    replay.ms(large, 2);
    EXPECT_EQ(live_tensor_bytes() - before, held);
  }
  EXPECT_EQ(live_tensor_bytes(), before);
  replay_gemms_ms(large, 1);  // the one-shot replay gives its scratch back
  EXPECT_EQ(live_tensor_bytes(), before);
}

TEST(TrainBench, ReplaysTheLastStepsRecordedProducts) {
  std::vector<float> a(64 * 64, 1.0f), c(64 * 64);
  kernels::GemmRecorder outer;
  {
    kernels::GemmRecorder rec;  // the innermost recorder records
    for (int step = 0; step < 2; ++step) {
      kernels::gemm(false, false, 64, 64, 64, 1.0f, a.data(), a.data(), 0.0f, c.data());
      kernels::gemm(true, false, 64, 32, 64, 1.0f, a.data(), a.data(), 0.0f, c.data());
    }
    ASSERT_EQ(rec.calls().size(), 4u);
    EXPECT_EQ(rec.calls()[1].trans_a, true);
    EXPECT_EQ(rec.calls()[1].n, 32);
    const std::vector<kernels::GemmArgs> last = last_step_products(rec.calls(), 2);
    ASSERT_EQ(last.size(), 2u);
    EXPECT_EQ(last[1].n, 32);
    EXPECT_TRUE(last_step_products(rec.calls(), 3).empty());  // 4 products do not make 3 equal steps
    EXPECT_GT(replay_gemms_ms(last, 3), 0.0);
  }
  EXPECT_TRUE(outer.calls().empty());
  EXPECT_EQ(c[0], 64.0f);  // the replay wrote into its own scratch, not into c
}

TEST(TrainBench, ParsesOnlyThePeerSummaryLine) {
  EXPECT_EQ(parse_peer_median_ms(R"({"event": "summary", "median_ms": 63.5, "mean_ms": 64})"), 63.5);
  EXPECT_FALSE(parse_peer_median_ms(R"({"event": "config", "median_ms": 1})"));
  EXPECT_FALSE(parse_peer_median_ms(R"({"event": "summary"})"));
  EXPECT_FALSE(parse_peer_median_ms("not json"));
  EXPECT_FALSE(parse_peer_median_ms(""));
}

TEST(TrainBench, PeerCommandRunsTheSameWorkload) {
  auto w2 = torch_harness_command("/usr/bin/python3", "train.py", {.workload = "w2", .threads = 2, .steps = 200, .warmup = 20, .data = ""});
  std::vector<std::string> want = {"/usr/bin/python3", "train.py", "--threads", "2", "--warmup", "20", "--workload",
                                   "shakespeare-char-gpt", "--iters", "200", "--eval-at", "200"};
  EXPECT_EQ(w2, want);
  auto w1 = torch_harness_command("py", "t.py", {.workload = "w1", .threads = 1, .steps = 63, .warmup = 20, .data = ""});
  EXPECT_EQ(std::vector<std::string>(w1.end() - 4, w1.end()),
            (std::vector<std::string>{"--workload", "mnist-mlp", "--epochs", "2"}));  // 63 steps need 2 epochs of 62
  auto cnn = torch_harness_command("py", "t.py", {.workload = "cnn", .threads = 1, .steps = 0, .warmup = 20, .data = ""});
  EXPECT_EQ(std::vector<std::string>(cnn.end() - 4, cnn.end()),
            (std::vector<std::string>{"--workload", "mnist-cnn", "--epochs", "2"}));  // its 124 steps
  EXPECT_TRUE(torch_harness_command("py", "t.py", {.workload = "cnn", .threads = 1, .precision = "bf16"}).empty());
}

TEST(TrainBench, ConfigsAreTheBaselineRecipes) {
  TrainConfig w2 = bench_config({.workload = "w2", .threads = 1, .steps = 50, .data = "x.txt"});
  EXPECT_EQ(w2.model, "gpt");
  EXPECT_EQ(w2.batch_size, 12);
  EXPECT_EQ(w2.steps, 50);
  EXPECT_EQ(w2.threads, 1);
  EXPECT_EQ(w2.generate, 0);
  TrainConfig w1 = bench_config({.workload = "w1", .threads = 2, .data = "mnist"});
  EXPECT_EQ(w1.model, "mlp");
  EXPECT_EQ(w1.steps, 124);
  EXPECT_EQ(w1.optimizer, "sgd");
  EXPECT_THROW(bench_config({.workload = "w3", .data = "x"}), Error);
  EXPECT_THROW(bench_config({.workload = "w1", .steps = 10, .warmup = 10, .data = "x"}), Error);
  TrainConfig big = bench_config({.workload = "gpt-50m", .threads = 1, .data = "x.txt"});
  EXPECT_EQ(big.model, "gpt");
  EXPECT_EQ(big.n_layer * big.n_embd, 8 * 720);
  EXPECT_EQ(big.steps, 12);
}

TEST(TrainBench, WarmupDefaultsToTwentyOrAQuarterOfTheSteps) {
  EXPECT_EQ(bench_warmup({.workload = "w2"}), 20);
  EXPECT_EQ(bench_warmup({.workload = "gpt-50m"}), 3);
  EXPECT_EQ(bench_warmup({.workload = "w2", .steps = 40}), 10);
  EXPECT_EQ(bench_warmup({.workload = "w2", .steps = 40, .warmup = 0}), 0);
  EXPECT_TRUE(torch_harness_command("py", "t.py", {.workload = "gpt-50m"}).empty());  // no peer recipe
}

// The gpt2 workload is --preset gpt2 at block 256, batch 4 (GPT-2 124M's
// shape, nanoGPT's recipe), and the harness runs the same shape on the same
// token file, at the same precision.
TEST(TrainBench, Gpt2WorkloadIsThePresetOnFourBlocksOf256Tokens) {
  TrainConfig g = bench_config({.workload = "gpt2", .threads = 2, .data = "tokens.bin", .precision = "bf16"});
  EXPECT_EQ(g.preset, "gpt2");
  EXPECT_EQ(g.n_layer * g.n_embd, 12 * 768);
  EXPECT_EQ(g.block_size, 256);
  EXPECT_EQ(g.batch_size, 4);
  EXPECT_EQ(g.beta2, 0.95);
  EXPECT_EQ(g.grad_clip, 1.0);
  EXPECT_EQ(g.steps, 8);
  EXPECT_EQ(g.precision, "bf16");
  EXPECT_EQ(bench_warmup({.workload = "gpt2"}), 2);
  auto argv = torch_harness_command("py", "t.py", {.workload = "gpt2", .threads = 2, .data = "tokens.bin",
                                                   .precision = "bf16"});
  auto has = [&](const std::string& flag, const std::string& value) {
    auto it = std::find(argv.begin(), argv.end(), flag);
    return it != argv.end() && it + 1 != argv.end() && *(it + 1) == value;
  };
  EXPECT_TRUE(has("--workload", "gpt2"));
  EXPECT_TRUE(has("--data-file", "tokens.bin"));
  EXPECT_TRUE(has("--precision", "bf16"));
  EXPECT_TRUE(has("--iters", "8"));
  EXPECT_TRUE(torch_harness_command("py", "t.py", {.workload = "w1", .precision = "bf16"}).empty());  // no autocast MLP
}

TEST(TrainBench, ScalingRunsTheHarnessUnderDdp) {
  auto two = torch_harness_command("py", "t.py", {.workload = "w1", .threads = 1, .steps = 62, .warmup = 20, .data = "", .workers = 2});
  ASSERT_GE(two.size(), 8u);
  EXPECT_EQ(std::vector<std::string>(two.begin() + 6, two.begin() + 8), (std::vector<std::string>{"--ddp", "2"}));
}

TEST(TrainBench, ConfigFlagsResolveBackToTheSameConfig) {
  TrainConfig cfg = bench_config({.workload = "w2", .threads = 1, .steps = 30, .warmup = 5, .data = "x.txt"});
  std::vector<std::string> flags = config_flags(cfg);
  ConfigSources src;
  for (size_t i = 0; i + 1 < flags.size(); i += 2) src.overrides[flags[i].substr(2)] = flags[i + 1];
  EXPECT_EQ(resolve_config(src).to_json(), cfg.to_json());
  EXPECT_EQ(std::find(flags.begin(), flags.end(), "--init"), flags.end());  // empty: left out
}

TEST(TrainBench, RunTimesComeFromTheStepLines) {
  std::string path = ::testing::TempDir() + "artel_run_times_" + std::to_string(::getpid()) + ".jsonl";
  std::ofstream(path) << R"({"step":1,"loss":1,"step_ms":50,"t_comp_ms":45,"t_sync_ms":5})" "\n"
                      << R"({"step":2,"loss":1,"step_ms":10,"t_comp_ms":8,"t_sync_ms":2})" "\n"
                      << R"({"step":3,"loss":1,"step_ms":12,"t_comp_ms":10,"t_sync_ms":1})" "\n"
                      << R"({"step":3,"val_loss":1})" "\n";
  RunTimes t = read_run_times(path, 1);
  EXPECT_DOUBLE_EQ(t.median_ms, 12);
  EXPECT_DOUBLE_EQ(t.comp_ms, 9);
  EXPECT_DOUBLE_EQ(t.sync_ms, 1.5);
  EXPECT_THROW(read_run_times(path, 3), Error);
  EXPECT_THROW(read_run_times(path + ".absent", 0), Error);
  std::remove(path.c_str());
}

TEST(TrainBench, RoundsCompareTheMedianOfEachSide) {
  // The per-round ratios are 0.8, 0.846 and 0.7; the summary is the ratio of
  // the sides' medians, 4.2 / 5.2, not the median ratio.
  RatioOfMedians m = ratio_of_medians({{4.0, 5.0}, {4.4, 5.2}, {4.2, 6.0}});
  EXPECT_DOUBLE_EQ(m.a_ms, 4.2);
  EXPECT_DOUBLE_EQ(m.b_ms, 5.2);
  EXPECT_DOUBLE_EQ(m.ratio, 4.2 / 5.2);
  EXPECT_DOUBLE_EQ(m.lowest, 4.2 / 6.0);
  EXPECT_DOUBLE_EQ(m.highest, 4.4 / 5.2);
  EXPECT_THROW(ratio_of_medians({}), Error);
}

TEST(TrainBench, ScalingOverRoundsIsTheRatioOfEachSidesMedian) {
  // A slow spell in round 2 slows both sides; the medians leave it out.
  ScalingSummary s = summarize_scaling({{4.0, 5.0, 0.10}, {8.0, 9.0, 0.30}, {4.2, 4.8, 0.05}});
  EXPECT_DOUBLE_EQ(s.one_ms, 4.2);
  EXPECT_DOUBLE_EQ(s.many_ms, 5.0);
  EXPECT_DOUBLE_EQ(s.efficiency, 4.2 / 5.0);
  EXPECT_DOUBLE_EQ(s.lowest, 4.0 / 5.0);
  EXPECT_DOUBLE_EQ(s.highest, 8.0 / 9.0);
  EXPECT_DOUBLE_EQ(s.sync_share, 0.10);
  ScalingSummary one = summarize_scaling({{4.0, 5.0, 0.1}});
  EXPECT_DOUBLE_EQ(one.efficiency, 0.8);
  EXPECT_DOUBLE_EQ(one.lowest, one.highest);
  EXPECT_THROW(summarize_scaling({}), Error);
  EXPECT_EQ(s.independent_efficiency, 0);  // not measured
}

TEST(TrainBench, IndependentRunsGiveTheMachinesOwnEfficiency) {
  // Two runs at 4 and 6 ms/step do 1/4 + 1/6 steps per ms together: two
  // workers at 4.8 ms each.
  EXPECT_DOUBLE_EQ(combined_step_ms({4.0, 6.0}), 4.8);
  EXPECT_DOUBLE_EQ(combined_step_ms({5.0}), 5.0);
  EXPECT_THROW(combined_step_ms({}), Error);
  EXPECT_THROW(combined_step_ms({4.0, 0.0}), Error);
  ScalingSummary s = summarize_scaling({{4.0, 5.0, 0.1, 4.4}, {4.2, 4.8, 0.1, 4.6}, {4.1, 5.2, 0.1, 9.0}});
  EXPECT_DOUBLE_EQ(s.independent_efficiency, 4.1 / 4.6);
  // Measured in some rounds only: no figure rather than a biased one.
  EXPECT_EQ(summarize_scaling({{4.0, 5.0, 0.1, 4.4}, {4.2, 4.8, 0.1, 0}}).independent_efficiency, 0);
}

TEST(TrainBench, LockstepPaceIsEachStepsSlowestRun) {
  // Both runs have the median 5, but their slow steps fall apart: in lockstep
  // every step waits for the slower, 4 6 6 6 6 -> 6 (the slowest median says 5).
  EXPECT_DOUBLE_EQ(lockstep_step_ms({{4, 6, 5, 6, 4}, {4, 5, 6, 4, 6}}), 6.0);
  EXPECT_DOUBLE_EQ(lockstep_step_ms({{4, 5, 6}}), 5.0);
  EXPECT_DOUBLE_EQ(lockstep_step_ms({{3, 9, 3}, {4, 4}}), 9.0);  // the steps both have: max(3,4), max(9,4)
  EXPECT_THROW(lockstep_step_ms({}), Error);
  EXPECT_THROW(lockstep_step_ms({{4, 5}, {}}), Error);
}

TEST(TrainBench, RunTimesKeepTheTimedSteps) {
  std::string path = ::testing::TempDir() + "artel_timed_steps_" + std::to_string(::getpid()) + ".jsonl";
  std::ofstream(path) << R"({"step":1,"loss":1,"step_ms":50})" "\n" R"({"step":2,"loss":1,"step_ms":10})" "\n"
                      << R"({"step":3,"loss":1,"step_ms":12})" "\n";
  EXPECT_EQ(read_run_times(path, 1).timed_ms, (std::vector<double>{10, 12}));
  std::remove(path.c_str());
}

TEST(TrainBench, LockstepEfficiencyIsSetByTheSlowerIndependentRun) {
  // Runs at 4 and 6 ms/step: together 4.8 ms a worker, but workers that wait
  // for each other every step go at the slower one's 6 ms.
  ScalingSummary s = summarize_scaling({{4.0, 5.0, 0.1, 4.8, 6.0}, {4.2, 4.8, 0.1, 4.6, 5.0}, {4.1, 5.2, 0.1, 9.0, 9.5}});
  EXPECT_DOUBLE_EQ(s.lockstep_efficiency, 4.1 / 6.0);
  EXPECT_DOUBLE_EQ(s.independent_efficiency, 4.1 / 4.8);
  EXPECT_EQ(summarize_scaling({{4.0, 5.0, 0.1, 4.4, 4.5}, {4.2, 4.8, 0.1, 4.6}}).lockstep_efficiency, 0);
}

}  // namespace
}  // namespace artel::train
