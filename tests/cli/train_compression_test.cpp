// Gradient compression through the real program (`--grad-compression`):
// PowerSGD trains close to the uncompressed reduction while handing a
// fraction of the bytes to the collectives (metrics.jsonl's grad_bytes);
// bf16 is the same reduction as `--grad-reduce-dtype bf16`; combinations
// that cannot work are refused with the reason.
#include <algorithm>

#include "artel/train/checkpoint.h"
#include "train_runs.h"

namespace {

using namespace artel_test;
using TrainCompression = TrainRuns;

// grad_bytes of every step of a run's metrics.jsonl.
std::vector<int64_t> grad_bytes(const fs::path& metrics) {
  std::ifstream in(metrics);
  std::vector<int64_t> bytes;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("grad_bytes")) bytes.push_back(j["grad_bytes"].get<int64_t>());
  }
  return bytes;
}

const std::string kWide = std::string(kGpt) + " --n-embd 64 --batch-size 4 --nproc 2 --steps 40 --lr 0.003";

TEST_F(TrainCompression, PowerSgdTrainsCloseToUncompressedOnAFractionOfTheBytes) {
  ok(train(kWide + " --zero 0" + out("none")));
  Result r = train(kWide + " --zero 0 --grad-compression powersgd --powersgd-rank 2 --powersgd-start-step 5" + out("powersgd"));
  ok(r);
  EXPECT_NE(r.out.find("PowerSGD rank 2 from step 6"), std::string::npos) << r.out;
  const std::vector<double> none = losses("none"), psgd = losses("powersgd");
  ASSERT_EQ(none.size(), psgd.size());
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(none[i], psgd[i]) << "step " << i + 1 << " is reduced uncompressed";
  EXPECT_NE(none.back(), psgd.back());
  const double gap = std::fabs(psgd.back() - none.back()) / none.back();
  std::cout << "[ compression ] final loss " << none.back() << " uncompressed, " << psgd.back() << " PowerSGD rank 2 ("
            << 100 * gap << "%)\n";
  EXPECT_LT(gap, 0.05);
  EXPECT_LT(psgd.back(), psgd.front() - 0.5) << "it trained";

  const std::vector<int64_t> plain = grad_bytes(dir_ / "none" / "metrics.jsonl"),
                             compressed = grad_bytes(dir_ / "powersgd" / "metrics.jsonl");
  ASSERT_EQ(compressed.size(), plain.size());
  EXPECT_EQ(compressed[4], plain[4]);
  EXPECT_LT(compressed[5] * 4, plain[5]) << "rank 2 sends under a quarter of the bytes";
  // A sharded step (ZeRO 1) takes the same compressed average.
  ok(train(kWide + " --zero 1 --grad-compression powersgd --powersgd-rank 2 --powersgd-start-step 5" + out("zero1")));
  expect_same_run("powersgd", "zero1", 1e-5);
}

// Note [PowerSGD in checkpoints]: a compressed run cut at a checkpoint and
// resumed goes on bit for bit as the uninterrupted one: Q, each rank's error
// feedback and the step count are in the checkpoint (the cut falls after
// compression started, so all three matter).
TEST_F(TrainCompression, PowerSgdResumesExactlyFromACheckpoint) {
  const std::string compressed = std::string(kGpt) +
                                 " --n-embd 64 --batch-size 4 --nproc 2 --lr 0.003 --zero 0 --grad-compression powersgd"
                                 " --powersgd-start-step 2";
  const std::string run = compressed + " --powersgd-rank 2";
  ok(train(run + " --steps 8" + out("whole")));
  ok(train(run + " --steps 5 --checkpoint-every 5" + out("cut")));
  const fs::path shard = dir_ / "cut" / "checkpoints" / "ckpt-00000005" / "rank-00001.artel";
  bool has_error = false;
  for (const auto& t : artel::train::read_checkpoint_header(shard.string()).tensors)
    has_error |= t.name.rfind("powersgd/dp2.rank1.error.", 0) == 0;
  EXPECT_TRUE(has_error) << "rank 1's error feedback is in its shard";
  fs::copy(dir_ / "cut", dir_ / "resumed", fs::copy_options::recursive);
  ok(train(run + " --steps 8 --resume" + out("resumed")));
  expect_identical_run("whole", "resumed");
  // Another --powersgd-rank: the checkpoint's Q has other columns, so none of
  // its PowerSGD state is taken (not the error feedback either), PowerSGD
  // starts afresh, and the run says so.
  fs::copy(dir_ / "cut", dir_ / "rank4", fs::copy_options::recursive);
  const Result r = train(compressed + " --powersgd-rank 4 --steps 8 --resume" + out("rank4"));
  ok(r);
  EXPECT_NE(r.out.find("holds no PowerSGD state for this layout and --powersgd-rank"), std::string::npos) << r.out;
}

// The same in a mesh, where each stage and tensor-parallel rank runs its own
// PowerSGD over its replicas: every position's state is in the checkpoint,
// keyed by the layout and the position (powersgd_parts.h).
TEST_F(TrainCompression, PowerSgdInAMeshResumesExactlyFromACheckpoint) {
  const std::string gpt =
      "--model gpt --n-layer 2 --n-head 2 --n-embd 64 --block-size 8 --batch-size 8 --eval-batches 1 --generate 0 "
      "--threads 1 --data-order sequential --seed 3 --nproc 4 --lr 0.003 --zero 0 --grad-compression powersgd "
      "--powersgd-rank 2 --powersgd-start-step 2 --timeout 120";
  struct Layout {
    std::string name, flags, rank3_error;  // world rank 3 is replica 1 of its position
  };
  const std::vector<Layout> layouts = {
      {"tp", "--tp 2", "powersgd/dp2.pp1.tp2.stage0[0,2).tp1.rank1.error."},
      {"pp", "--pp 2 --micro-batches 2", "powersgd/dp2.pp2.tp1.stage1[1,2).tp0.rank1.error."}};
  for (const Layout& l : layouts) {
    SCOPED_TRACE(l.name);
    const std::string run = gpt + " " + l.flags;
    ok(train(run + " --steps 8" + out(l.name + "_whole")));
    ok(train(run + " --steps 5 --checkpoint-every 5" + out(l.name + "_cut")));
    const fs::path shard = dir_ / (l.name + "_cut") / "checkpoints" / "ckpt-00000005" / "rank-00003.artel";
    std::vector<std::string> keys;
    for (const auto& t : artel::train::read_checkpoint_header(shard.string()).tensors) keys.push_back(t.name);
    auto is_rank3_error = [&](const std::string& k) { return k.rfind(l.rank3_error, 0) == 0; };
    EXPECT_TRUE(std::any_of(keys.begin(), keys.end(), is_rank3_error))
        << "world rank 3's error feedback, under " << l.rank3_error << ", is in its shard";
    fs::copy(dir_ / (l.name + "_cut"), dir_ / (l.name + "_resumed"), fs::copy_options::recursive);
    const Result r = train(run + " --steps 8 --resume" + out(l.name + "_resumed"));
    ok(r);
    EXPECT_EQ(r.out.find("no PowerSGD state"), std::string::npos) << r.out;
    expect_identical_run(l.name + "_whole", l.name + "_resumed");
  }
  // Another layout finds none of its positions' state: PowerSGD starts afresh, and the run says so.
  fs::copy(dir_ / "tp_cut", dir_ / "tp_to_pp", fs::copy_options::recursive);
  const Result r = train(gpt + " --pp 2 --micro-batches 2 --steps 8 --resume" + out("tp_to_pp"));
  ok(r);
  EXPECT_NE(r.out.find("holds no PowerSGD state for this layout and --powersgd-rank; it starts afresh"),
            std::string::npos) << r.out;
}

TEST_F(TrainCompression, Bf16IsTheReductionOfGradReduceDtypeBf16) {
  ok(train(kWide + " --steps 6 --grad-compression bf16" + out("compression")));
  ok(train(kWide + " --steps 6 --grad-reduce-dtype bf16" + out("dtype")));
  expect_identical_run("compression", "dtype");
  const std::vector<int64_t> bytes = grad_bytes(dir_ / "dtype" / "metrics.jsonl");
  ok(train(kWide + " --steps 6" + out("fp32")));
  EXPECT_EQ(2 * bytes.back(), grad_bytes(dir_ / "fp32" / "metrics.jsonl").back());
}

TEST_F(TrainCompression, ImpossibleCombinationsAreRefusedWithTheReason) {
  Result r = train(kWide + " --steps 1 --zero 2 --grad-compression powersgd" + out("a"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("use --zero 0 or 1"), std::string::npos) << r.err;
  r = train(kWide + " --steps 1 --grad-compression powersgd --grad-reduce-dtype bf16" + out("b"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("two compressions"), std::string::npos) << r.err;
  r = train(kWide + " --steps 1 --grad-compression topk" + out("c"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("powersgd"), std::string::npos) << r.err;
  r = train(kWide + " --steps 1 --grad-compression powersgd --powersgd-rank 0" + out("d"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("powersgd_rank"), std::string::npos) << r.err;
}

}  // namespace
