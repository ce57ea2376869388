// Sharded checkpoints end to end, through the real program: a checkpoint
// written under one layout resumes under another — world size, dp, pp, tp,
// --zero — and the run goes on as the uninterrupted one did (same global
// batch: the same batches, losses equal to float rounding); each worker's
// shard holds its own parts only; a torn checkpoint is skipped for the one
// before; `artel checkpoint export` writes the run's final.safetensors
// byte for byte from a checkpoint of any layout.
#include <algorithm>

#include "artel/train/checkpoint.h"
#include "train_runs.h"

namespace {

using namespace artel_test;
using TrainCheckpoint = TrainRuns;

// 2 blocks (--pp 2 needs them), 2 heads (--tp 2 splits them), the bundled text.
constexpr const char* kCheckpointGpt =
    "--n-layer 2 --n-head 2 --n-embd 16 --block-size 8 --eval-batches 1 --generate 0 --threads 1 "
    "--data-order sequential --seed 3 --timeout 60";

class TrainCheckpointRuns : public TrainCheckpoint {
 protected:
  // `run` trained 6 steps as `layout`, with a checkpoint after step 3.
  void cut_at_3(const std::string& layout, const std::string& run) {
    ok(train(std::string(kCheckpointGpt) + " " + layout + " --steps 3 --checkpoint-every 3" + out(run)));
  }
  // A copy of `from`'s output, resumed to step 6 as `layout`; returns what it printed.
  std::string resume_as(const std::string& from, const std::string& layout, const std::string& run) {
    fs::copy(dir_ / from, dir_ / run, fs::copy_options::recursive);
    Result r = train(std::string(kCheckpointGpt) + " " + layout + " --steps 6 --resume" + out(run));
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    return r.out;
  }
  // Steps 4..6 of `run` against the uninterrupted `whole`, within `tol`
  // relative; prints the largest difference measured.
  void expect_resumed_like(const std::string& whole, const std::string& run, double tol = 1e-6) {
    const std::vector<double> a = losses(whole), b = losses(run);
    ASSERT_EQ(a.size(), 6u);
    ASSERT_EQ(b.size(), 6u) << run;
    double worst = 0;
    for (size_t i = 0; i < 6; ++i) {
      EXPECT_NEAR(a[i], b[i], tol * std::fabs(a[i])) << run << ", step " << i + 1;
      worst = std::max(worst, std::fabs(a[i] - b[i]) / std::fabs(a[i]));
    }
    std::cout << "[ resharded ] " << run << ": largest relative loss difference " << worst
              << ", largest weight difference " << max_weight_diff(whole, run) << "\n";
  }
  // Bytes of tensor data in each shard of `run`'s checkpoint of `step`.
  std::vector<uint64_t> shard_bytes(const std::string& run, const std::string& ckpt) const {
    std::vector<uint64_t> out;
    for (int r = 0; fs::exists(dir_ / run / "checkpoints" / ckpt / shard(r)); ++r) {
      uint64_t n = 0;
      for (const auto& t : artel::train::read_checkpoint_header((dir_ / run / "checkpoints" / ckpt / shard(r)).string()).tensors)
        n += t.nbytes;
      out.push_back(n);
    }
    return out;
  }
  static std::string shard(int r) {
    char name[32];
    std::snprintf(name, sizeof name, "rank-%05d.artel", r);
    return name;
  }
};

TEST_F(TrainCheckpointRuns, DataParallelCheckpointResumesUnderEveryLayout) {
  ok(train(std::string(kCheckpointGpt) + " --nproc 2 --batch-size 4 --steps 6" + out("whole")));
  cut_at_3("--nproc 2 --batch-size 4", "cut");  // --zero 1: each rank wrote its owned elements
  const std::string one = resume_as("cut", "--batch-size 8", "one");
  EXPECT_NE(one.find("ckpt-00000003 (step 3), written by 2 workers (dp 2), read by 1 (dp 1)\n"), std::string::npos)
      << one;
  const std::string four = resume_as("cut", "--nproc 4 --batch-size 2", "four");
  EXPECT_NE(four.find("written by 2 workers (dp 2), read by 4 (dp 4)"), std::string::npos) << four;
  const std::string pp = resume_as("cut", "--nproc 2 --pp 2 --batch-size 8", "pp");
  EXPECT_NE(pp.find("written by 2 workers (dp 2), read by 2 (dp 1 x pp 2 x tp 1)"), std::string::npos) << pp;
  const std::string replicated = resume_as("cut", "--nproc 2 --batch-size 4 --zero 0", "replicated");
  EXPECT_NE(replicated.find("the checkpoint was written under --zero 1, this run goes on under --zero 0\n"),
            std::string::npos) << replicated;
  // Without --accum the checkpoint's global batch of 8 is kept.
  const std::string accum = resume_as("cut", "--batch-size 4", "accum");
  EXPECT_NE(accum.find("keeping the checkpoint's global batch of 8 with --accum 2"), std::string::npos) << accum;
  EXPECT_NE(accum.find("x 1 worker(s) x 2 micro-steps = global batch 8"), std::string::npos) << accum;
  for (const char* run : {"one", "four", "pp", "replicated", "accum"}) expect_resumed_like("whole", run);
}

TEST_F(TrainCheckpointRuns, TensorParallelAndReplicatedCheckpointsReshard) {
  ok(train(std::string(kCheckpointGpt) + " --batch-size 8 --steps 6" + out("whole")));
  cut_at_3("--nproc 2 --tp 2 --batch-size 8", "tp");
  resume_as("tp", "--batch-size 8", "tp_to_one");
  resume_as("tp", "--nproc 2 --batch-size 4", "tp_to_dp");
  resume_as("tp", "--nproc 2 --pp 2 --batch-size 8", "tp_to_pp");
  cut_at_3("--nproc 2 --batch-size 4 --zero 0", "replicated");
  resume_as("replicated", "--nproc 4 --tp 2 --batch-size 4", "replicated_to_dp_tp");
  for (const char* run : {"tp_to_one", "tp_to_dp", "tp_to_pp", "replicated_to_dp_tp"}) expect_resumed_like("whole", run);
}

// ZeRO-3: each worker writes its own flat range of every parameter and of its
// state, and any layout reads it back: more workers, one worker, another stage.
// Its export is the run's final weights, which no worker ever held whole.
TEST_F(TrainCheckpointRuns, ZeroThreeCheckpointsReshard) {
  ok(train(std::string(kCheckpointGpt) + " --batch-size 8 --steps 6" + out("whole")));
  cut_at_3("--nproc 2 --batch-size 4 --zero 3", "zero3");
  const std::vector<uint64_t> bytes = shard_bytes("zero3", "ckpt-00000003");
  ASSERT_EQ(bytes.size(), 2u);
  for (uint64_t b : bytes) EXPECT_LT(b, 0.6 * static_cast<double>(bytes[0] + bytes[1])) << "no shard holds the model";
  resume_as("zero3", "--nproc 4 --batch-size 2 --zero 3", "zero3_to_four");
  resume_as("zero3", "--batch-size 8", "zero3_to_one");
  resume_as("zero3", "--nproc 2 --batch-size 4 --zero 1", "zero3_to_zero1");
  cut_at_3("--nproc 2 --batch-size 4 --zero 2", "zero2");
  resume_as("zero2", "--nproc 2 --batch-size 4 --zero 3", "zero2_to_zero3");
  for (const char* run : {"zero3_to_four", "zero3_to_one", "zero3_to_zero1", "zero2_to_zero3"})
    expect_resumed_like("whole", run);
  const fs::path weights = dir_ / "zero3.safetensors";
  ok(artel("checkpoint export " + (dir_ / "zero3" / "checkpoints").string() + " " + weights.string()));
  EXPECT_EQ(slurp(weights), slurp(dir_ / "zero3" / "final.safetensors"));  // byte for byte
}

TEST_F(TrainCheckpointRuns, ExportOfAMeshCheckpointIsTheFinalWeights) {
  const std::string mesh = std::string(kCheckpointGpt) + " --nproc 4 --tp 2 --pp 2 --batch-size 8 --steps 2 --checkpoint-every 2";
  ok(train(mesh + out("mesh")));
  const fs::path weights = dir_ / "exported.safetensors";
  Result r = artel("checkpoint export " + (dir_ / "mesh" / "checkpoints").string() + " " + weights.string());
  ok(r);
  EXPECT_NE(r.out.find("ckpt-00000002 (step 2)"), std::string::npos) << r.out;
  EXPECT_EQ(slurp(weights), slurp(dir_ / "mesh" / "final.safetensors"));  // byte for byte
  // The newest complete one: a torn newer checkpoint is skipped, said on one line.
  fs::create_directories(dir_ / "mesh" / "checkpoints" / "ckpt-00000004");
  Result skipped = artel("checkpoint export " + (dir_ / "mesh" / "checkpoints").string() + " " + weights.string());
  ok(skipped);
  EXPECT_NE(skipped.err.find("artel checkpoint: skipping checkpoint " +
                             (dir_ / "mesh" / "checkpoints" / "ckpt-00000004" / "manifest.json").string() +
                             ": no manifest"),
            std::string::npos) << skipped.err;
  EXPECT_EQ(slurp(weights), slurp(dir_ / "mesh" / "final.safetensors"));
  Result torn = artel("checkpoint export " + (dir_ / "mesh" / "checkpoints" / "ckpt-00000004").string() + " x.st");
  EXPECT_EQ(torn.code, 1);
  EXPECT_EQ(torn.err.rfind("artel checkpoint: error: checkpoint ", 0), 0u) << torn.err;
  EXPECT_EQ(std::count(torn.err.begin(), torn.err.end(), '\n'), 1) << torn.err;
  Result none = artel("checkpoint export " + (dir_ / "missing").string() + " x.st");
  EXPECT_EQ(none.code, 1);
  EXPECT_NE(none.err.find("no such directory"), std::string::npos) << none.err;
  // The run's directory stands for its checkpoints/, for `artel export` too.
  fs::remove(weights);
  ok(artel("export " + (dir_ / "mesh").string() + " " + weights.string()));
  EXPECT_EQ(slurp(weights), slurp(dir_ / "mesh" / "final.safetensors"));
  // A run without checkpoints: the hint names its final weights.
  ok(train(std::string(kCheckpointGpt) + " --batch-size 8 --steps 1" + out("plain")));
  Result plain = artel("export " + (dir_ / "plain").string() + " x.st");
  EXPECT_EQ(plain.code, 1);
  EXPECT_NE(plain.err.find("no complete checkpoint in " + (dir_ / "plain").string() + " (hint: the run's last weights are " +
                           (dir_ / "plain" / "final.safetensors").string()),
            std::string::npos) << plain.err;
  EXPECT_EQ(std::count(plain.err.begin(), plain.err.end(), '\n'), 1) << plain.err;
}

// No worker writes the whole model: the shards' bytes sum to the model and
// its optimizer state once, each shard about its worker's share.
TEST_F(TrainCheckpointRuns, ShardsHoldEachElementOnce) {
  const std::string g = std::string(kCheckpointGpt) + " --steps 1 --checkpoint-every 1";
  ok(train(g + " --batch-size 8" + out("alone")));
  ok(train(g + " --nproc 2 --tp 2 --zero 0 --batch-size 8" + out("tp")));
  ok(train(g + " --nproc 2 --batch-size 4" + out("zero1")));
  ok(train(g + " --nproc 2 --batch-size 4 --zero 0" + out("zero0")));
  const std::vector<uint64_t> alone = shard_bytes("alone", "ckpt-00000001");
  ASSERT_EQ(alone.size(), 1u);
  for (const char* run : {"tp", "zero1"}) {
    const std::vector<uint64_t> parts = shard_bytes(run, "ckpt-00000001");
    ASSERT_EQ(parts.size(), 2u) << run;
    std::cout << "[ shards ] " << run << ": " << parts[0] << " + " << parts[1] << " bytes, alone " << alone[0] << "\n";
    EXPECT_LE(parts[0] + parts[1], alone[0] + 8 * 64) << run;  // the vocabulary's padding rows at most
    EXPECT_GE(parts[0] + parts[1], alone[0]) << run;
    for (uint64_t p : parts) EXPECT_LT(p, alone[0] * 6 / 10) << run;  // about half each
  }
  const std::vector<uint64_t> replicated = shard_bytes("zero0", "ckpt-00000001");
  EXPECT_EQ(replicated, (std::vector<uint64_t>{alone[0], 0}));  // the same model on both: written once
}

TEST_F(TrainCheckpointRuns, TornCheckpointsAreSkippedForThePreviousOne) {
  const std::string g = std::string(kCheckpointGpt) + " --nproc 2 --batch-size 4 --checkpoint-every 2 --keep-checkpoints 4";
  ok(train(g + " --steps 10" + out("whole")));
  ok(train(g + " --steps 8" + out("cut")));
  const fs::path ckpts = dir_ / "cut" / "checkpoints";
  fs::remove(ckpts / "ckpt-00000004" / shard(1));                  // a shard lost
  fs::remove(ckpts / "ckpt-00000006" / "manifest.json");           // never committed
  const fs::path corrupt = ckpts / "ckpt-00000008" / shard(1);     // data corrupt, header intact: rank 1 reads it
  const auto info = artel::train::read_checkpoint_header(corrupt.string()).tensors.back();
  std::string bytes = slurp(corrupt);
  bytes[info.offset + 1] ^= 0x40;
  std::ofstream(corrupt, std::ios::binary | std::ios::trunc) << bytes;
  Result r = train(g + " --steps 10 --resume" + out("cut"));
  ok(r);
  const std::string c = ckpts.string();
  EXPECT_NE(r.out.find("skipping checkpoint " + corrupt.string() + ": tensor '"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CRC mismatch (its data is corrupt); trying " + c + "/ckpt-00000006\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("skipping checkpoint " + c + "/ckpt-00000006/manifest.json: no manifest"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("skipping checkpoint " + c + "/ckpt-00000004/" + shard(1) + ": missing"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("resuming from " + c + "/ckpt-00000002 (step 2)\n"), std::string::npos) << r.out;
  expect_identical_run("whole", "cut");
}

// A fresh run into an --out of an earlier run's checkpoints is refused
// before it trains, by the launcher once: a worker's restart resumed from the
// earlier run's newest (another seed's weights, exit 0). --resume continues it.
TEST_F(TrainCheckpointRuns, AFreshRunRefusesAnEarlierRunsCheckpoints) {
  const std::string g = std::string(kCheckpointGpt) + " --nproc 2 --batch-size 4 --checkpoint-every 2";
  ok(train(g + " --steps 4" + out("run")));
  const std::string c = (dir_ / "run" / "checkpoints").string();
  for (const std::string more : {" --seed 7", " --seed 7 --checkpoint-every 0 --max-restarts 1"}) {
    Result r = train(g + " --steps 4" + more + out("run"));
    EXPECT_EQ(r.code, 1) << more;
    EXPECT_EQ(r.err, "artel train: error: " + c + " holds an earlier run's checkpoints (newest ckpt-00000004), which "
                     "a fresh run would mix with its own and a restart would resume from (hint: pass --resume to "
                     "continue that run, or train into another --out (or remove " + c + "))\n") << more;
  }
  ok(train(g + " --steps 6 --resume" + out("run")));
}

// --accum chooses another global batch: the data goes on from the samples consumed.
TEST_F(TrainCheckpointRuns, ExplicitAccumChangesTheGlobalBatchAndKeepsTheDataPosition) {
  cut_at_3("--nproc 2 --batch-size 4", "cut");
  const std::string half = resume_as("cut", "--batch-size 4 --accum 1", "half");
  EXPECT_NE(half.find("global batch 4 where the checkpoint's was 8: the data goes on from sample 24"), std::string::npos)
      << half;
  EXPECT_EQ(losses("half").size(), 6u);
  // A mesh keeps it by its batch size; another one is refused, naming the one that works.
  fs::copy(dir_ / "cut", dir_ / "mesh", fs::copy_options::recursive);
  Result mesh = train(std::string(kCheckpointGpt) + " --nproc 2 --pp 2 --batch-size 4 --steps 6 --resume" + out("mesh"));
  EXPECT_NE(mesh.code, 0);
  EXPECT_NE(mesh.err.find("global batch of 8; --batch-size 4 with dp 1 gives 4 (hint: valid: --batch-size 8;"),
            std::string::npos) << mesh.err;
}

}  // namespace
