// `artel train --tp T --pp P --micro-batches M` end to end, through the real
// program: every layout computes the update of one worker on the same global
// batch (equivalence, for both schedules and M in {1, 2, 4, 8}), writes the
// whole model under single-worker names, resumes from its checkpoints
// exactly, writes a timeline, and refuses bad layouts before any worker
// starts. The layouts come from each model's declared plan, so the MLP and
// the CNN run them too, and the bundled tinyshakespeare's 65 characters
// split over 2 and 4 tensor-parallel ranks with a padded vocabulary.
#include "train_runs.h"

namespace {

using namespace artel_test;
using TrainMesh = TrainRuns;

// 4 blocks (PP 4 needs them), 2 heads (TP 2 splits them), tiny widths.
constexpr const char* kMeshGpt =
    "--model gpt --n-layer 4 --n-head 2 --n-embd 16 --block-size 8 --eval-batches 2 --generate 0 --threads 1 "
    "--data-order sequential --seed 5 --steps 2 --timeout 60";

// A short run of the MLP or the CNN (after --model).
constexpr const char* kSmallModelRun =
    "--threads 1 --data-order sequential --seed 5 --steps 3 --eval-batches 2 --batch-size 16 --timeout 60";

class TrainMeshRuns : public TrainMesh {
 protected:
  void SetUp() override {
    TrainMesh::SetUp();
    std::ofstream text(dir_ / "text.txt");
    const std::string alphabet = "abcdefghijklmnopqrstuvwxyz .,;!\n";  // 32 characters
    for (int i = 0; i < 4000; ++i) text << alphabet[(i * 7 + i / 13) % alphabet.size()];
  }
  std::string gpt() const { return std::string(kMeshGpt) + " --data " + (dir_ / "text.txt").string(); }

  // One worker on batch B·dp against the layout, for every schedule and M in
  // {1, 2, 4, 8}: the interleaved one (2 chunks a stage) where the 4 blocks
  // make 2 chunks for each of the stages, at M a multiple of 2 stages.
  void expect_layout_equals_one_worker(const std::string& layout, int nproc, int dp) {
    const std::string ref = "ref" + std::to_string(dp);
    ok(train(gpt() + " --batch-size " + std::to_string(8 * dp) + out(ref)));
    // The schedule orders a pipeline's micro-batches: without stages there is one order.
    const bool pipeline = layout.find("--pp") != std::string::npos;
    const bool interleaves = layout.find("--pp 2") != std::string::npos;
    std::vector<const char*> schedules = {""};
    if (pipeline) schedules = {"gpipe", "1f1b"};
    if (interleaves) schedules.push_back("interleaved --chunks 2");
    for (const char* schedule : schedules)
      for (int m : {1, 2, 4, 8}) {
        if (std::string(schedule).find("interleaved") == 0 && m == 1) continue;  // M a multiple of the stages
        const std::string run = std::string(pipeline ? std::string(schedule).substr(0, 4) : "tp") + "_m" + std::to_string(m);
        ok(train(gpt() + " --batch-size 8 --nproc " + std::to_string(nproc) + " " + layout +
                 (pipeline ? std::string(" --schedule ") + schedule : "") + " --micro-batches " + std::to_string(m) +
                 out(run)));
        expect_same_run(ref, run);
      }
  }
};

TEST_F(TrainMeshRuns, TensorParallel2EqualsOneWorker) { expect_layout_equals_one_worker("--tp 2", 2, 1); }

// Vocabulary 65: padded to 66 over 2 ranks and 68 over 4; the padded rows
// never reach the loss nor the weights file (whose wte is 65 rows, as one worker's).
TEST_F(TrainMeshRuns, TensorParallelPadsAVocabularyItDoesNotDivide) {
  std::string text = std::string(kMeshGpt) + " --data " + ARTEL_SOURCE_DIR + "/data/tinyshakespeare.txt --batch-size 4";
  text.replace(text.find("--n-head 2"), 10, "--n-head 4");  // 4 heads split over 4 ranks
  ok(train(text + out("one")));
  ok(train(text + " --nproc 2 --tp 2" + out("tp2")));
  ok(train(text + " --nproc 4 --tp 4" + out("tp4")));
  expect_same_run("one", "tp2");
  expect_same_run("one", "tp4");
  auto weights = artel::nn::read_safetensors((dir_ / "tp4" / "final.safetensors").string());
  EXPECT_EQ(weights.tensors.at("transformer.wte.weight").shape(), (artel::Shape{65, 16}));
}

// The MLP and the CNN cut into stages between their layers (their plans'
// pieces), and the MLP split Megatron-style over its two hidden layers.
TEST_F(TrainMeshRuns, MlpAndCnnPipelinesEqualOneWorker) {
  for (const char* model : {"mlp", "cnn"}) {
    const std::string m = std::string("--model ") + model + " " + kSmallModelRun;
    ok(train(m + out(std::string(model) + "_one")));
    ok(train(m + " --nproc 2 --pp 2 --micro-batches 2" + out(std::string(model) + "_pp2")));
    expect_same_run(std::string(model) + "_one", std::string(model) + "_pp2");
  }
  const std::string mlp = "--model mlp --threads 1 --data-order sequential --seed 5 --steps 3 --eval-batches 2 "
                          "--batch-size 16 --timeout 60";
  ok(train(mlp + " --nproc 2 --tp 2" + out("mlp_tp2")));
  expect_same_run("mlp_one", "mlp_tp2");
}

// The word LM's blocks split over tensor-parallel ranks as the GPT's do (its
// word table and head whole on each), and its pieces cut into stages: the
// same run as one worker, its sparse table included. Under SGD, whose
// update is the gradient itself (AdamW's normalisation would magnify the
// rounding of the rarely used words' tiny gradients towards its tolerance).
TEST_F(TrainMeshRuns, AWordModelSplitsItsBlocksAndStagesAsTheGpt) {
  const std::string w = "--model wordlm --n-layer 2 --n-head 4 --threads 1 --data-order sequential --steps 3 "
                        "--eval-batches 2 --batch-size 8 --timeout 60 --optimizer sgd --lr 0.5 --weight-decay 0";
  ok(train(w + out("word_one")));
  ok(train(w + " --nproc 2 --tp 2" + out("word_tp2")));
  expect_same_run("word_one", "word_tp2");
  ok(train(w + " --nproc 4 --tp 2 --pp 2 --micro-batches 2" + out("word_tp2_pp2")));
  expect_same_run("word_one", "word_tp2_pp2");
}
TEST_F(TrainMeshRuns, Pipeline2EqualsOneWorker) { expect_layout_equals_one_worker("--pp 2", 2, 1); }
TEST_F(TrainMeshRuns, Pipeline4EqualsOneWorker) { expect_layout_equals_one_worker("--pp 4", 4, 1); }
TEST_F(TrainMeshRuns, DataParallel2ByPipeline2EqualsOneWorker) { expect_layout_equals_one_worker("--pp 2", 4, 2); }
TEST_F(TrainMeshRuns, DataParallel2ByTensorParallel2EqualsOneWorker) {
  expect_layout_equals_one_worker("--tp 2", 4, 2);
}
TEST_F(TrainMeshRuns, TensorParallel2ByPipeline2EqualsOneWorker) {
  expect_layout_equals_one_worker("--tp 2 --pp 2", 4, 1);
}

// Megatron's sequence parallelism: the blocks' layer norms, dropouts and
// residuals on each tensor-parallel rank's share of the tokens, and the same
// steps as one worker — at every micro-batch count, with dropout on (each
// rank keeps its tokens of the single worker's masks), in a pipeline, beside
// data parallelism, and for the MLP, whose tokens are its rows. Sampling
// afterwards takes prompts of any length.
TEST_F(TrainMeshRuns, SequenceParallelEqualsOneWorker) {
  expect_layout_equals_one_worker("--tp 2 --sequence-parallel", 2, 1);
  Result r = train(gpt() + " --batch-size 8 --nproc 4 --tp 2 --pp 2 --micro-batches 2 --sequence-parallel true" +
                   out("sp_pp"));
  ok(r);
  EXPECT_NE(r.out.find("layout dp 1 x pp 2 x tp 2 sequence-parallel; 2 micro-batch(es)"), std::string::npos) << r.out;
  expect_same_run("ref1", "sp_pp");
  ok(train(gpt() + " --batch-size 16" + out("ref2")));
  ok(train(gpt() + " --batch-size 8 --nproc 4 --tp 2 --sequence-parallel true" + out("sp_dp")));
  expect_same_run("ref2", "sp_dp");
  std::string dropped = gpt() + " --batch-size 8 --dropout 0.1";
  dropped.replace(dropped.find("--generate 0"), 12, "--generate 20");
  ok(train(dropped + out("drop_one")));
  r = train(dropped + " --nproc 2 --tp 2 --sequence-parallel true" + out("drop_sp"));
  ok(r);
  expect_same_run("drop_one", "drop_sp");
  EXPECT_NE(r.out.find("characters sampled"), std::string::npos) << r.out;
  const std::string mlp = std::string("--model mlp ") + kSmallModelRun;
  ok(train(mlp + out("mlp_one")));
  ok(train(mlp + " --nproc 2 --tp 2 --sequence-parallel true" + out("mlp_sp")));
  expect_same_run("mlp_one", "mlp_sp");
}

// --zero 1 shards the optimizer step over the data-parallel ranks of a mesh
// (the tied embedding's step stays replicated: it is summed across stages
// whole); --zero 0 replicates it. Both take one worker's steps, with
// gradient clipping active so the sharded norm is exercised too.
TEST_F(TrainMeshRuns, ShardedAndReplicatedStepsOfAMeshEqualOneWorker) {
  const std::string g = gpt() + " --grad-clip 0.05";
  ok(train(g + " --batch-size 16" + out("one")));
  for (const char* layout : {"--pp 2 --micro-batches 2", "--tp 2"})
    for (const char* zero : {"0", "1"}) {
      const std::string run = std::string(layout[2] == 'p' ? "pp" : "tp") + "_zero" + zero;
      Result r = train(g + " --batch-size 8 --nproc 4 " + layout + " --zero " + zero + out(run));
      ok(r);
      EXPECT_NE(r.out.find(std::string(zero) == "1" ? "optimizer sharded over 2 ranks" : "all-reduce bucket"),
                std::string::npos) << r.out;
      expect_same_run("one", run);
    }
}

#ifdef ARTEL_MPIEXEC
TEST_F(TrainMeshRuns, MpiMeshEqualsOneWorker) {
  const std::string mpirun = std::string(ARTEL_MPIEXEC) + " --allow-run-as-root --oversubscribe -np 4 ";
  ok(train(gpt() + " --batch-size 8" + out("one")));
  ok(train(gpt() + " --batch-size 8 --backend mpi --tp 2 --pp 2 --micro-batches 4" + out("mesh"), "", mpirun));
  expect_same_run("one", "mesh");
}
#endif

// Recomputing activations reruns the same ops (and draws the same dropout
// masks): the same run to the bit, alone and on a mesh.
TEST_F(TrainMeshRuns, RecomputeChangesNothingButWhatIsKept) {
  const std::string g = gpt() + " --batch-size 8 --dropout 0.1";
  for (const char* mode : {"none", "selective", "full"}) ok(train(g + " --recompute " + mode + out(mode)));
  expect_identical_run("none", "selective");
  expect_identical_run("none", "full");
  const std::string pp = g + " --nproc 2 --pp 2 --micro-batches 2";
  ok(train(pp + out("pp_none")));
  ok(train(pp + " --recompute full" + out("pp_full")));
  expect_identical_run("pp_none", "pp_full");
  const std::string tp = g + " --nproc 2 --tp 2";
  ok(train(tp + out("tp_none")));
  ok(train(tp + " --recompute selective" + out("tp_selective")));
  expect_identical_run("tp_none", "tp_selective");
  Result bad = train(g + " --recompute some" + out("bad"));
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("recompute"), std::string::npos) << bad.err;
}

// The sample after training runs through the shards (no worker gathers the
// model): the mesh draws the same text as one worker.
TEST_F(TrainMeshRuns, SamplesThroughTheShardsTheTextOneWorkerSamples) {
  auto sampled = [](const std::string& out) {
    std::string text;
    std::istringstream in(out);
    bool inside = false;
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("[0] ", 0) == 0) line = line.substr(4);
      if (line.find("characters sampled") != std::string::npos) inside = true;
      else if (line == "---") inside = false;
      else if (inside) text += line + "\n";
    }
    return text;
  };
  std::string g = gpt() + " --batch-size 8";
  g.replace(g.find("--generate 0"), 12, "--generate 40");
  Result one = train(g + out("one"));
  Result mesh = train(g + " --nproc 4 --tp 2 --pp 2 --micro-batches 2" + out("mesh"));
  ok(one);
  ok(mesh);
  EXPECT_GE(sampled(one.out).size(), 40u) << one.out;
  EXPECT_EQ(sampled(mesh.out), sampled(one.out)) << mesh.out;
}

TEST_F(TrainMeshRuns, PrintsTheLayoutAndWhatEachStageHeld) {
  Result r = train(gpt() + " --batch-size 8 --nproc 2 --pp 2 --micro-batches 4 --schedule gpipe" + out("g"));
  ok(r);
  EXPECT_NE(r.out.find("layout dp 1 x pp 2 x tp 1; 4 micro-batch(es) of 2 rows, gpipe; layers per stage [0,2) [2,4)"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("      0  [0,2)                   4"), std::string::npos) << "GPipe holds all M:\n" << r.out;
  r = train(gpt() + " --batch-size 8 --nproc 2 --pp 2 --micro-batches 4 --schedule 1f1b --stage-layers cost" + out("f"));
  ok(r);
  const size_t stage0 = r.out.find("      0  [0,");  // the blocks per stage are measured here
  ASSERT_NE(stage0, std::string::npos) << r.out;
  EXPECT_EQ(r.out.substr(stage0 + 14, 20), "                   2") << "1F1B holds at most P:\n" << r.out;
  EXPECT_NE(r.out.find("balanced by measured ms per micro-batch: embed "), std::string::npos) << r.out;
}

TEST_F(TrainMeshRuns, ResumedRunIsIdenticalToAnUninterruptedOne) {
  std::string g = gpt() + " --batch-size 8 --nproc 4 --tp 2 --pp 2 --micro-batches 2 --checkpoint-every 2";
  ok(train(g + " --steps 4" + out("whole")));
  ok(train(g + " --steps 2" + out("resumed")));
  ok(train(g + " --steps 4 --resume" + out("resumed")));
  expect_identical_run("whole", "resumed");
  // Interleaved: each stage writes and reads the parts of both its chunks
  // (dropout on, so the stage's generator must come back too).
  g = gpt() + " --batch-size 8 --nproc 2 --pp 2 --schedule interleaved --chunks 2 --micro-batches 2 "
              "--checkpoint-every 2 --dropout 0.1";
  ok(train(g + " --steps 4" + out("il_whole")));
  ok(train(g + " --steps 2" + out("il_resumed")));
  ok(train(g + " --steps 4 --resume" + out("il_resumed")));
  expect_identical_run("il_whole", "il_resumed");
}

// The MLP and the CNN interleave too: their layers cut into 4 chunks, 2 a
// stage, each stage holding two runs of layers.
TEST_F(TrainMeshRuns, InterleavedPipelinesOfAnyModelEqualOneWorker) {
  for (const char* model : {"mlp", "cnn"}) {
    const std::string m = std::string("--model ") + model + " " + kSmallModelRun;
    ok(train(m + out(std::string(model) + "_one")));
    Result r = train(m + " --nproc 2 --pp 2 --schedule interleaved --chunks 2 --micro-batches 4" +
                     out(std::string(model) + "_il"));
    ok(r);
    EXPECT_NE(r.out.find("interleaved x2 chunks; layers per stage [0,"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(")+["), std::string::npos) << "each stage holds two runs of layers:\n" << r.out;
    expect_same_run(std::string(model) + "_one", std::string(model) + "_il");
  }
}

TEST_F(TrainMeshRuns, KilledStageIsRestartedFromTheNewestCheckpoint) {
  std::string g = gpt() + " --batch-size 8 --nproc 2 --pp 2 --micro-batches 2 --steps 4 --checkpoint-every 1";
  ok(train(g + out("whole")));
  Result r = train(g + " --max-restarts 1" + out("restarted"), "ARTEL_TEST_FAULT=kill@1:2");
  ok(r);
  EXPECT_NE(r.err.find("restarting all 2 workers"), std::string::npos) << r.err;
  EXPECT_EQ(max_weight_diff("whole", "restarted"), 0.0);
}

TEST_F(TrainMeshRuns, TraceHoldsEveryWorkerAndThePipelineSvgTheBubble) {
  Result r = train(gpt() + " --batch-size 8 --nproc 2 --pp 2 --micro-batches 4 --steps 3 --trace " +
                   (dir_ / "t.json").string() + out("t"));
  ok(r);
  auto j = nlohmann::json::parse(slurp(dir_ / "t.json"));
  std::set<int> pids;
  int forwards = 0;
  for (const auto& e : j["traceEvents"]) {
    pids.insert(e["pid"].get<int>());
    if (e["name"] == "forward" && e["ph"] == "X") ++forwards;
  }
  EXPECT_EQ(pids, (std::set<int>{0, 1}));
  EXPECT_GE(forwards, 2 * 3 * 4);
  std::string svg = slurp(dir_ / "t.svg");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u) << svg.substr(0, 80);
  EXPECT_NE(r.out.find("ideal (P - 1)/(M + P - 1) = 0.2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unequal stages alone: 0."), std::string::npos) << r.out;
  // Interleaved over 2 chunks a stage: the bubble's ideal halves, (P - 1)/(V·M + P - 1).
  r = train(gpt() + " --batch-size 8 --nproc 2 --pp 2 --schedule interleaved --chunks 2 --micro-batches 4 --steps 3 "
                    "--trace " + (dir_ / "il.json").string() + out("il"));
  ok(r);
  EXPECT_NE(r.out.find("ideal (P - 1)/(V·M + P - 1) = 0.111"), std::string::npos) << r.out;

  // Data parallelism alone, and one process, trace too; a trace inside the
  // run's folder, which the run has yet to make, is written there.
  Result dp = train(gpt() + " --batch-size 4 --nproc 2 --trace " + (dir_ / "dp.json").string() + out("dp"));
  ok(dp);
  // Each worker's step phases: the trainer's, and its group's collectives (ZeRO 1's by default).
  EXPECT_NE(dp.out.find("step phases, median ms a step over steps 1-2"), std::string::npos) << dp.out;
  EXPECT_NE(dp.out.find("rank 1 compute: load "), std::string::npos) << dp.out;
  EXPECT_NE(dp.out.find("rank 1 comm world: "), std::string::npos) << dp.out;
  EXPECT_NE(dp.out.find("reduce_scatter "), std::string::npos) << dp.out;
  // and every op's time, forward and backward apart (autograd's OpSpan).
  EXPECT_NE(dp.out.find("rank 1 forward ops: embedding "), std::string::npos) << dp.out;
  EXPECT_NE(dp.out.find("rank 1 backward ops: cross_entropy "), std::string::npos) << dp.out;
  EXPECT_NE(dp.out.find(" layer_norm "), std::string::npos) << dp.out;
  ok(train(gpt() + " --batch-size 4 --trace " + (dir_ / "one" / "one.json").string() + out("one")));
  for (const fs::path& file : {dir_ / "dp.json", dir_ / "one" / "one.json"}) {
    auto t = nlohmann::json::parse(slurp(file));
    int backwards = 0;
    for (const auto& e : t["traceEvents"]) backwards += e["name"] == "backward";
    EXPECT_EQ(backwards, file.filename() == "dp.json" ? 2 * 2 : 2) << file;
  }
}

TEST_F(TrainMeshRuns, BadLayoutsFailBeforeAnyWorkerStarts) {
  // A GPT's layout unless the arguments name another model (which the GPT's shape flags would not fit).
  auto fails = [&](const std::string& args, const std::string& says) {
    Result r = train((args.find("--model") == std::string::npos ? gpt() + " " : std::string()) + args + out("bad"));
    EXPECT_NE(r.code, 0) << args;
    EXPECT_NE(r.err.find(says), std::string::npos) << args << ":\n" << r.err;
    EXPECT_EQ(r.out.find("[0]"), std::string::npos) << "a worker started for " << args;
  };
  fails("--nproc 3 --tp 2", "does not divide the world size 3");
  fails("--nproc 4 --pp 8 --n-layer 4", "8 stages for a model of 4 blocks");
  fails("--nproc 4 --tp 4 --n-head 2", "does not divide the 2 attention heads");
  fails("--nproc 2 --pp 2 --batch-size 6 --micro-batches 4", "does not divide --batch-size 6");
  fails("--nproc 2 --pp 2 --stage-layers fast", "neither params, cost nor a list of block counts");
  fails("--nproc 8 --pp 8 --model mlp", "8 stages for a model of 5 layers");
  fails("--nproc 2 --tp 2 --model cnn", "model cnn declares no tensor-parallel split");
  fails("--nproc 2 --sequence-parallel true", "this run has none (--tp 1)");
  fails("--nproc 2 --tp 2 --sequence-parallel true --block-size 7", "each sequence's 7 tokens over --tp 2");
  fails("--nproc 2 --tp 2 --sequence-parallel true --model mlp --batch-size 15", "micro-batch's 15 rows");
  fails("--nproc 2 --pp 2 --stage-layers 1,2", "adds up to 3 blocks");
  fails("--nproc 2 --pp 2 --schedule zigzag", "unknown schedule 'zigzag'");
  fails("--nproc 2 --pp 2 --schedule interleaved --micro-batches 2", "each stage must hold 2 or more model chunks");
  fails("--nproc 2 --pp 2 --schedule interleaved --chunks 2 --micro-batches 1", "a multiple of --pp");
  fails("--nproc 2 --pp 2 --schedule interleaved --chunks 4 --micro-batches 2", "8 model chunks for a model of 4 blocks");
  fails("--nproc 2 --pp 2 --chunks 2 --micro-batches 2", "only --schedule interleaved runs");
  fails("--nproc 2 --pp 2 --schedule interleaved --chunks 2 --micro-batches 2 --stage-layers 1,3",
        "--stage-layers gives 2 block counts, --pp 2 x --chunks 2 asks for 4");
  fails("--nproc 4 --pp 2 --schedule interleaved --chunks 3 --micro-batches 2 --model mlp",
        "6 stages");  // more chunks than the MLP's 5 layers
}

}  // namespace
