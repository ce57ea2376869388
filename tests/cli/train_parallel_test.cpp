// `artel train --nproc N` end to end, through the real program: data
// parallelism computes the update of one worker on the whole global batch
// (equivalence, --accum), checkpoints resume bit-for-bit, a killed worker is
// restarted from the newest checkpoint, a stopped one makes its peers time
// out naming it. Tiny models: every run takes well under a second; the
// faults are injected deterministically (ARTEL_TEST_FAULT, train_command.cpp).
#include <algorithm>

#include "train_runs.h"

namespace {

using namespace artel_test;
using TrainParallel = TrainRuns;

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
  // Bucketing changes when gradients travel, never what they sum to.
  Result buckets = train(m + " --batch-size 16 --nproc 2 --first-bucket-mb 0.00001 --bucket-mb 0.001" + out("buckets"));
  ok(buckets);
  EXPECT_NE(buckets.out.find("sync   6 reduce-scatter buckets: 40 B, 20.0 KiB, 2.0 KiB, 1.00 MiB, 2.0 KiB, 1.53 MiB; "
                             "optimizer sharded over 2 ranks"),
            std::string::npos) << buckets.out;
  expect_same_run("one", "two");
  expect_same_run("one", "buckets");
  expect_same_run("one", "four");
  expect_same_run("one", "accum");
}

// A host whose /dev/shm has little room, as in a container (Docker gives
// 64 MiB): a worker registers what fits, says that the rest is ordinary
// memory (the launcher writes the line once), and trains to the same
// weights. When each worker backed its whole 64 MiB as it joined, such a
// job could not start. The small /dev/shm is a tmpfs in a mount namespace
// of the run's own (unshare -m).
TEST_F(TrainParallel, ASmallDevShmTrainsTheSameWeightsSayingSoOnce) {
  if (std::system("unshare -m true >/dev/null 2>&1") != 0) GTEST_SKIP() << "no mount namespaces here (unshare -m)";
  const std::string m = std::string(kMlp) + " --steps 3 --batch-size 16 --nproc 2";
  ok(train(m + out("roomy")));
  // 6 MiB: the segment's head (4.5 MiB for 2 workers) and some of the 2.6 MB of gradient buckets.
  const Result small = train(m + out("small"), "",
                             "unshare -m sh -c 'mount -t tmpfs -o size=6M artel-test /dev/shm && exec \"$0\" \"$@\"' ");
  ok(small);
  size_t notes = 0;
  for (size_t at = small.err.find("artel: note: registered memory for communication falls back to ordinary memory");
       at != std::string::npos; at = small.err.find("artel: note: registered memory", at + 1))
    ++notes;
  EXPECT_EQ(notes, 1u) << "said once, as the launcher says a line every worker says alike:\n" << small.err;
  EXPECT_NE(small.err.find("No space left on device (hint: free space in /dev/shm"), std::string::npos) << small.err;
  expect_identical_run("roomy", "small");
}

// wordlm's table is sparse (nn::Embedding::set_sparse): data parallelism
// gathers the rows its lookups read instead of reducing the table, and
// still takes one worker's step on the global batch, at ZeRO 1 and at ZeRO
// 2 with accumulated micro-steps. The bytes it hands over count the rows,
// not the table's 14,565 x 16 floats.
TEST_F(TrainParallel, ASparseTablesRowsAloneGiveOneWorkersStep) {
  const std::string m =
      "--model wordlm --n-embd 16 --n-head 2 --block-size 8 --steps 3 --eval-batches 1 --threads 1 "
      "--data-order sequential --seed 3";
  ok(train(m + " --batch-size 4" + out("one")));
  Result two = train(m + " --batch-size 2 --nproc 2" + out("two"));
  ok(two);
  EXPECT_NE(two.out.find(" (embed.weight, sparse: only its rows gathered)"), std::string::npos) << two.out;
  ok(train(m + " --batch-size 1 --accum 2 --nproc 2 --zero 2" + out("zero2")));
  expect_same_run("one", "two");
  expect_same_run("one", "zero2");
  std::ifstream in(dir_ / "two" / "metrics.jsonl");
  std::string first;
  std::getline(in, first);
  // The dense parameters (14,565 x 33 + 3,952 floats, as the parameter
  // server's test counts them) and at most 16 rows of 16 floats and an id,
  // with the buckets' padding: not the table's 14,565 x 16 floats.
  const double handed = nlohmann::json::parse(first)["grad_bytes"].get<double>();
  EXPECT_GT(handed, 14565.0 * 33 * 4) << first;
  EXPECT_LT(handed, (14565.0 * 33 + 3952) * 4 + 16 * (16 * 4 + 8) + 1024) << first;
}

// Each worker updating its block of the weights (the default, --zero 1) and
// every worker updating all of them (--zero 0) compute every element from the
// same numbers: the same bits, for SGD with momentum and for AdamW. Clipping
// sums the norm in another order, so there only float rounding may differ.
// Checkpoints hold the whole optimizer state either way: one written by a
// sharded run resumes a replicated one exactly.
TEST_F(TrainParallel, ShardedOptimizerStepEqualsTheReplicatedOne) {
  std::string m = std::string(kMlp) + " --steps 4 --batch-size 16 --nproc 2 --momentum 0.9";
  ok(train(m + out("sharded")));
  Result replicated = train(m + " --zero 0" + out("replicated"));
  ok(replicated);
  EXPECT_NE(replicated.out.find("sync   2 all-reduce buckets: 1.02 MiB, 1.53 MiB (--first"), std::string::npos)
      << replicated.out;
  expect_identical_run("sharded", "replicated");

  std::string g = std::string(kGpt) + " --steps 4 --batch-size 4 --nproc 2 --checkpoint-every 2";
  ok(train(g + " --zero 0" + out("gpt_replicated")));
  Result cut = train(g + out("gpt_cut"), "ARTEL_TEST_FAULT=kill@1:3");
  EXPECT_NE(cut.code, 0);
  ok(train(g + " --zero 0 --resume" + out("gpt_cut")));
  expect_identical_run("gpt_replicated", "gpt_cut");

  std::string clip = std::string(kGpt) + " --steps 4 --batch-size 4 --nproc 2 --grad-clip 0.5";
  ok(train(clip + out("clip_sharded")));
  ok(train(clip + " --zero 0" + out("clip_replicated")));
  expect_same_run("clip_sharded", "clip_replicated", 1e-6);
}

// ZeRO stage 2 keeps 1/N of the averaged gradients, stage 3 of the weights
// too: the same weights as stage 0 up to float rounding (the clipping norm and
// the micro-steps are summed in another order), for the GPT (its tied
// embedding is stage 3's root unit) and the MLP, with AdamW, clipping and
// micro-steps; stage 2 on a dp 2 x tp 2 mesh too. What they do not support
// is refused in one line.
TEST_F(TrainParallel, ZeroStagesTwoAndThreeEqualStageZero) {
  const std::string g = std::string(kGpt) + " --n-layer 2 --steps 4 --batch-size 2 --accum 2 --nproc 2 --grad-clip 0.5";
  ok(train(g + " --zero 0" + out("gpt0")));
  Result two = train(g + " --zero 2" + out("gpt2"));
  ok(two);
  EXPECT_NE(two.out.find("optimizer and gradients sharded over 2 ranks"), std::string::npos) << two.out;
  Result three = train(g + " --zero 3" + out("gpt3"));
  ok(three);
  EXPECT_NE(three.out.find("sync   5 units (largest "), std::string::npos) << three.out;
  ok(train(g + " --zero 3 --reshard-after-forward false --recompute full" + out("gpt3_kept")));
  for (const char* run : {"gpt2", "gpt3", "gpt3_kept"}) expect_same_run("gpt0", run, 1e-5);

  const std::string m = std::string(kMlp) + " --steps 3 --batch-size 16 --nproc 2";
  ok(train(m + " --zero 0" + out("mlp0")));
  ok(train(m + " --zero 2" + out("mlp2")));
  ok(train(m + " --zero 3" + out("mlp3")));
  expect_same_run("mlp0", "mlp2", 1e-6);
  expect_same_run("mlp0", "mlp3", 1e-6);

  const std::string mesh = std::string(kGpt) + " --steps 3 --batch-size 4 --nproc 4 --tp 2";
  ok(train(mesh + " --zero 0" + out("mesh0")));
  ok(train(mesh + " --zero 2" + out("mesh2")));
  expect_same_run("mesh0", "mesh2", 1e-6);

  Result tp3 = train(mesh + " --zero 3" + out("mesh3"));
  EXPECT_NE(tp3.code, 0);
  EXPECT_NE(tp3.err.find("--zero 3 with --tp / --pp / --micro-batches"), std::string::npos) << tp3.err;
  Result pp2 = train(std::string(kGpt) + " --n-layer 2 --steps 1 --batch-size 4 --nproc 2 --pp 2 --zero 2" + out("pp2"));
  EXPECT_NE(pp2.code, 0);
  EXPECT_NE(pp2.err.find("use --zero 1 with --pp"), std::string::npos) << pp2.err;
}

#ifdef ARTEL_MPIEXEC
TEST_F(TrainParallel, MpiWorkersEqualOneWorkerOnTheGlobalBatch) {
  std::string mpirun = std::string(ARTEL_MPIEXEC) + " --allow-run-as-root --oversubscribe -np ";
  ok(train(std::string(kGpt) + " --steps 3 --batch-size 8" + out("gpt1")));
  ok(train(std::string(kGpt) + " --steps 3 --batch-size 4 --backend mpi" + out("gpt2"), "", mpirun + "2 "));
  ok(train(std::string(kMlp) + " --steps 3 --batch-size 32" + out("mlp1")));
  Result mlp4 = train(std::string(kMlp) + " --steps 3 --batch-size 8 --backend mpi" + out("mlp4"), "", mpirun + "4 ");
  ok(mlp4);
  // mpirun gives ranks a pseudo-terminal even when its output is a file: plain lines, no bar.
  EXPECT_EQ(mlp4.out.find('\r'), std::string::npos) << mlp4.out;
  EXPECT_NE(mlp4.out.find("\nstep 3/3 | loss "), std::string::npos) << mlp4.out;
  expect_same_run("gpt1", "gpt2");
  expect_same_run("mlp1", "mlp4");
}

// mpirun starts each rank with its own command line (here two, ':'-joined)
// and each reads its own files: ranks started differently stop at once with
// one line naming the difference, not at the collectives' timeout.
TEST_F(TrainParallel, MpiRanksStartedDifferentlyStopAtOnceNamingTheDifference) {
  const std::string np1 = std::string(ARTEL_MPIEXEC) + " --allow-run-as-root --oversubscribe -np 1 ";
  const std::string next = std::string(" : -np 1 ") + ARTEL_BINARY + " train ";
  const std::string mlp = std::string(kMlp) + " --batch-size 8 --backend mpi --timeout 100" + out("mlp");
  Result steps = train(mlp + " --steps 3" + next + mlp + " --steps 5", "", np1);
  EXPECT_NE(steps.code, 0);
  EXPECT_NE(steps.err.find("error: rank 1 was started with --steps 5, rank 0 with --steps 3"), std::string::npos)
      << steps.err;
  // Another model is named as such, not by the first default of its that differs.
  Result model = train(mlp + " --steps 3" + next + mlp + " --steps 3 --model cnn", "", np1);
  EXPECT_NE(model.code, 0);
  EXPECT_NE(model.err.find("error: rank 1 was started with --model 'cnn', rank 0 with --model 'mlp'"), std::string::npos)
      << model.err;

  // The same flags, but one host's copy of the token file is longer.
  for (auto [name, tokens] : {std::pair{"a.bin", 4096}, std::pair{"b.bin", 4098}}) {
    std::ofstream f(dir_ / name, std::ios::binary);
    for (uint16_t i = 0; i < tokens; ++i) f.write(reinterpret_cast<const char*>(&i), 2);
  }
  const std::string gpt = std::string(kGpt) + " --steps 2 --batch-size 2 --vocab-size 4098 --backend mpi --timeout 100";
  Result data = train(gpt + out("a") + " --data a.bin" + next + gpt + out("b") + " --data b.bin", "", np1);
  EXPECT_NE(data.code, 0);
  EXPECT_NE(data.err.find("error: rank 1's --data holds 8196 bytes, rank 0's holds 8192 bytes"), std::string::npos)
      << data.err;
  EXPECT_EQ(data.err.find("timed out"), std::string::npos) << data.err;
}

// Ranks whose --out differ (each host its own disk): a checkpoint cannot
// come together, and the rank that finds out ends the job at once, where
// its peers would have waited out their timeout in the next collective; a
// resume stops before any rank restores, naming the rank that sees none.
TEST_F(TrainParallel, MpiRanksThatCannotShareCheckpointsStopAtOnceSayingWhy) {
  const std::string np = std::string(ARTEL_MPIEXEC) + " --allow-run-as-root --oversubscribe -np ";
  const std::string next = std::string(" : -np 1 ") + ARTEL_BINARY + " train ";
  const std::string mlp = std::string(kMlp) + " --batch-size 8 --backend mpi --timeout 100 --checkpoint-every 2";
  Result write = train(mlp + " --steps 2" + out("a") + next + mlp + " --steps 2" + out("b"), "", np + "1 ");
  EXPECT_NE(write.code, 0);
  EXPECT_NE(write.err.find("rank 1's shard rank-00001.artel is not there"), std::string::npos) << write.err;
  EXPECT_NE(write.err.find("the job has been aborted"), std::string::npos) << write.err;  // mpirun's words
  EXPECT_EQ(write.err.find("timed out"), std::string::npos) << write.err;

  ok(train(mlp + " --steps 2" + out("c"), "", np + "2 "));
  Result resume = train(mlp + " --steps 4 --resume" + out("c") + next + mlp + " --steps 4 --resume" + out("d"), "", np + "1 ");
  EXPECT_NE(resume.code, 0);
  EXPECT_NE(resume.err.find("no checkpoint is seen by every rank: rank 0 sees 1 (the newest ckpt-00000002) in " +
                            (dir_ / "c" / "checkpoints").string() + ", rank 1 sees none in " +
                            (dir_ / "d" / "checkpoints").string()),
            std::string::npos)
      << resume.err;
}

// A rank that fails while the group is still being made (here its launch
// variables contradict mpirun's ranks) ends the job at once, where finalising
// MPI at exit would wait for peers blocked in the group's first collective
// until their timeout.
TEST_F(TrainParallel, MpiRankThatFailsToJoinTheGroupEndsTheJobAtOnce) {
  const std::string mlp = std::string(kMlp) + " --steps 2 --batch-size 8 --backend mpi --timeout 60" + out("mlp");
  const std::string np1 = std::string(ARTEL_MPIEXEC) + " --allow-run-as-root --oversubscribe -np 1 ";
  Result r = train(mlp + " : -np 1 " + ARTEL_BINARY + " train " + mlp, "",
                   np1 + "env ARTEL_RANK=1 ARTEL_WORLD_SIZE=2 ARTEL_JOB_ID=stale ");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("error: the mpi backend: GroupOptions say rank 1 of 2 but MPI says rank 0 of 2"),
            std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("timed out"), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, 30);
}
#endif

TEST_F(TrainParallel, ResumedRunIsIdenticalToAnUninterruptedOne) {
  std::string g = std::string(kGpt) + " --steps 6 --batch-size 4 --nproc 2 --checkpoint-every 2 --dropout 0.1";
  ok(train(g + out("whole")));
  // The same run, killed right after step 3 (its checkpoint of step 2 is the newest): no restarts.
  Result dead = train(g + out("cut"), "ARTEL_TEST_FAULT=kill@0:3");
  EXPECT_NE(dead.code, 0);
  EXPECT_NE(dead.err.find("worker 0 was killed by signal SIGKILL"), std::string::npos) << dead.err;
  EXPECT_TRUE(fs::exists(dir_ / "cut" / "checkpoints" / "ckpt-00000002" / "manifest.json"));
  Result resumed = train(g + " --resume" + out("cut"));
  ok(resumed);
  EXPECT_NE(resumed.out.find("resuming from"), std::string::npos) << resumed.out;
  EXPECT_NE(resumed.out.find("ckpt-00000002 (step 2)\n"), std::string::npos) << resumed.out;  // the same layout: said no more
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
  Result r = train(std::string(kMlp) + " --steps 6 --batch-size 16 --nproc 2 --timeout 6" + out("run"),
                   "ARTEL_TEST_FAULT=stop@1:2");
  EXPECT_NE(r.code, 0);
  EXPECT_LT(r.seconds, 30);
  EXPECT_NE(r.err.find("rank(s) [1]"), std::string::npos) << r.err;  // the op and the stopped rank
  EXPECT_NE(r.err.find("worker 0 exited with status 1"), std::string::npos) << r.err;
}

// Under ZeRO 3 the waiting worker holds gathers in flight when the timeout
// unwinds it: it ends with the timeout's line and status 1 (it aborted in
// std::terminate, the sharding's destructor waiting on them and rethrowing).
TEST_F(TrainParallel, StoppedWorkerUnderZeroThreeTimesOutWithoutAborting) {
  Result r = train(std::string(kMlp) + " --steps 6 --batch-size 16 --nproc 2 --zero 3 --timeout 4" + out("run"),
                   "ARTEL_TEST_FAULT=stop@1:3");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("rank(s) [1]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("worker 0 exited with status 1"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
}

// A worker over its memory limit (prlimit --as, inherited by every worker)
// stops with one line naming the allocation, what it held and what would help.
TEST_F(TrainParallel, OutOfMemoryIsOneLineNamingWhatWouldHelp) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space, which prlimit --as cannot leave room for";
#endif
  // 85 M parameters: 1.36 GB of weights, gradients and AdamW state, over a 1.2 GB cap.
  const std::string big = "--model gpt --n-layer 12 --n-head 12 --n-embd 768 --block-size 256 --batch-size 8 "
                          "--steps 2 --generate 0 --threads 1 --checkpoint-every 1 --nproc 2";
  Result r = train(big + out("oom"), "", "prlimit --as=1200000000 ");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("artel train: error: out of memory: allocating "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" MiB for "), std::string::npos) << r.err;  // what the allocation was for
  EXPECT_NE(r.err.find("--zero 3 (weights, gradients and optimizer state sharded), --recompute full"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("exited with status 1"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "oom" / "checkpoints" / "ckpt-00000001.artel"));
  EXPECT_FALSE(fs::exists(dir_ / "oom" / "final.safetensors"));
}

TEST_F(TrainParallel, CorruptNewestCheckpointFallsBackToThePreviousOne) {
  std::string m = std::string(kMlp) + " --batch-size 16 --checkpoint-every 2";
  ok(train(m + " --steps 6" + out("whole")));
  ok(train(m + " --steps 4" + out("cut")));
  fs::path shard = dir_ / "cut" / "checkpoints" / "ckpt-00000004" / "rank-00000.artel";
  fs::resize_file(shard, fs::file_size(shard) / 2);
  Result r = train(m + " --steps 6 --resume" + out("cut"));
  ok(r);
  const std::string checkpoints = (dir_ / "cut" / "checkpoints").string();
  EXPECT_NE(r.out.find("artel train: skipping checkpoint " + shard.string() + ": truncated"), std::string::npos)
      << r.out;  // reported, and what comes next said once
  EXPECT_NE(r.out.find("; trying " + checkpoints + "/ckpt-00000002\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("resuming from " + checkpoints + "/ckpt-00000002 (step 2)"), std::string::npos) << r.out;
  expect_identical_run("whole", "cut");
}

// The model must match; the layout need not (train_checkpoint_test.cpp), as
// long as it can hold the checkpoint's global batch or --accum says otherwise.
TEST_F(TrainParallel, CheckpointOfAnotherModelOrAnImpossibleLayoutIsRefused) {
  std::string g = std::string(kGpt) + " --batch-size 4 --checkpoint-every 2 --steps 2";
  ok(train(g + out("run")));
  Result wider = train(g + " --steps 4 --resume --n-embd 32" + out("run"));
  EXPECT_NE(wider.code, 0);
  EXPECT_NE(wider.err.find("model config n_embd 16 in the checkpoint, 32 in this run"), std::string::npos) << wider.err;
  Result more = train(g + " --steps 4 --resume --nproc 2" + out("run"));
  EXPECT_NE(more.code, 0);
  EXPECT_NE(more.err.find("was trained with a global batch of 4; --batch-size 4 with 2 workers gives 8 rows per "
                          "micro-step, and no --accum makes them 4 (hint: valid with 2 workers: --batch-size 2, "
                          "--batch-size 1 --accum 2; "
                          "or pass --accum"),
            std::string::npos) << more.err;
  // Said once, before any worker starts (was: by worker 0, then the launcher's "worker exited" line).
  EXPECT_EQ(more.err.rfind("artel train: error: checkpoint ", 0), 0u) << more.err;
  EXPECT_EQ(std::count(more.err.begin(), more.err.end(), '\n'), 1) << more.err;
  Result three = train(g + " --steps 4 --resume --nproc 3 --batch-size 1" + out("run"));
  EXPECT_NE(three.code, 0);
  EXPECT_NE(three.err.find("no batch size does with 3 workers; data-parallel degrees 1, 2 or 4 can"),
            std::string::npos) << three.err;
  Result fewer = train(g + " --steps 1 --resume --nproc 2 --batch-size 2" + out("run"));
  EXPECT_EQ(fewer.err, "artel train: error: checkpoint " + (dir_ / "run" / "checkpoints" / "ckpt-00000002").string() +
                           " was taken after step 2 but this run has only 1 steps (hint: raise --steps, or train into "
                           "another --out)\n");
}

TEST_F(TrainParallel, MpiBackendWithNprocPointsAtMpirun) {
  Result r = train(std::string(kGpt) + " --steps 1 --nproc 2 --backend mpi" + out("run"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("mpirun -np 2 artel train --backend mpi"), std::string::npos) << r.err;
}

// The scaling benchmark end to end, briefly: its runs (1 x 1, 2 x 1 and two
// 1 x 1 at once) all finish and give figures; their size is machine business.
TEST_F(TrainParallel, ScalingBenchmarkMeasuresDdpAndIndependentRuns) {
  Result r = artel("bench train --scaling --workloads w1 --steps 12 --warmup 2 --torch off --json");
  ok(r);
  auto j = nlohmann::json::parse(r.out.substr(r.out.rfind('{')));
  EXPECT_EQ(j["workload"], "w1");
  for (const char* key :
       {"artel_1x1_ms", "artel_2x1_ms", "artel_efficiency", "independent_efficiency", "lockstep_efficiency"})
    EXPECT_GT(j[key].get<double>(), 0) << key << " in " << r.out;
  // The slower of two runs is never faster than their combined pace.
  EXPECT_LE(j["lockstep_efficiency"].get<double>(), j["independent_efficiency"].get<double>()) << r.out;
  EXPECT_GT(j["sync_share"].get<double>(), 0) << r.out;
}

// The header names the BLAS that the harness's torch says it was built with:
// PyPI's wheels multiply with MKL, not the OpenBLAS that Debian's torch calls.
// A stand-in python answers the probe and prints one summary line.
TEST_F(TrainParallel, BenchHeaderNamesTheBlasOfTheHarnessTorch) {
  for (const std::string blas : {"mkl 9.9.9", "generic 1.13.0a0"}) {
    const fs::path python = dir_ / "python";
    {
      std::ofstream f(python);
      f << "#!/bin/sh\n"
           "case \"$2\" in *BLAS_INFO*) echo '" << blas << "' ;; *) echo '{\"event\": \"summary\", \"median_ms\": 1.5}' ;; esac\n";
    }
    fs::permissions(python, fs::perms::owner_all);
    Result r = artel("bench train --workloads w1 --threads 1 --steps 4 --warmup 1 --python " + python.string());
    ok(r);
    const std::string mkl = "# PyTorch GEMM: MKL (torch 9.9.9, BLAS_INFO=mkl)\n";
    if (blas.rfind("mkl", 0) == 0) EXPECT_NE(r.out.find(mkl), std::string::npos) << r.out;
    else EXPECT_NE(r.out.find("# PyTorch GEMM: OpenBLAS"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("1.50"), std::string::npos) << "the stand-in's median is the torch column:\n" << r.out;
  }
}

}  // namespace
