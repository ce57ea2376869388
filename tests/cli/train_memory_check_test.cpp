// `artel train` refuses, before any worker starts, a layout the planner
// predicts not to fit in a worker's memory (cli/planned_run.h), with the
// planner's numbers; --no-memory-check starts it anyway.
#include <algorithm>

#include "train_runs.h"

namespace artel_test {
namespace {

using TrainMemoryCheck = TrainRuns;

// A GPT of 4 blocks 1024 wide: ~52 M parameters, whose fp32 weights, gradients
// and AdamW state (16 bytes a parameter) are ~0.8 GiB, against 256 MiB a worker.
constexpr const char* kTooBig =
    "--n-layer 4 --n-head 8 --n-embd 1024 --block-size 64 --steps 1 --eval-batches 1 --generate 0 --threads 1 ";

TEST_F(TrainMemoryCheck, RefusesALayoutThePlannerSaysDoesNotFitWithItsNumbers) {
  const Result r = train(std::string(kTooBig) + "--memory-per-worker 256M" + out("big"));
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  for (const char* part : {"the planner predicts", "parameters", "gradients", "optimizer state", "activations",
                           "but a worker has 256.00 MiB (--memory-per-worker)", "--no-memory-check"}) {
    EXPECT_NE(r.err.find(part), std::string::npos) << part << " missing from: " << r.err;
  }
  EXPECT_FALSE(fs::exists(dir_ / "big" / "metrics.jsonl"));
}

TEST_F(TrainMemoryCheck, NoMemoryCheckStartsItAnyway) {
  // Past the planner the run meets the limit itself (an out-of-memory error,
  // or no cgroup to put it in): what is certain is that the planner is not
  // what stops it.
  const Result r = train(std::string(kTooBig) + "--memory-per-worker 256M --no-memory-check" + out("big"));
  EXPECT_EQ(r.err.find("the planner predicts"), std::string::npos) << r.err;
}

TEST_F(TrainMemoryCheck, TheSameModelFitsWhenTheLimitHoldsIt) {
  const Result r = train(std::string(kTooBig) + "--memory-per-worker 3G" + out("fits"));
  EXPECT_EQ(r.err.find("the planner predicts"), std::string::npos) << r.err;
}

// The same for a model whose costs the planner measures (a word LM, as
// `artel plan --model wordlm` plans it): the check is not the GPT's alone.
TEST_F(TrainMemoryCheck, RefusesAMeasuredModelThatDoesNotFit) {
  const Result r = train("--model wordlm " + std::string(kTooBig) + "--memory-per-worker 256M" + out("wordlm"));
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  for (const char* part : {"the planner predicts", "activations", "but a worker has 0.25 GiB", "--no-memory-check"}) {
    EXPECT_NE(r.err.find(part), std::string::npos) << part << " missing from: " << r.err;
  }
  EXPECT_FALSE(fs::exists(dir_ / "wordlm" / "metrics.jsonl"));
}

TEST_F(TrainMemoryCheck, AMeasuredModelThatFitsStarts) {
  const Result r = train("--model mlp --steps 1 --eval-batches 1 --threads 1 --memory-per-worker 3G" + out("mlp"));
  EXPECT_EQ(r.err.find("the planner predicts"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace artel_test
