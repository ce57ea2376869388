// `artel train --ps-servers S` end to end: BSP computes what data
// parallelism computes, under the launcher and under mpirun; under SSP a
// killed worker is dropped and the others finish, under BSP it fails the
// job; settings a parameter server cannot honour are refused in one line.
#include "train_runs.h"

namespace {

using namespace artel_test;
using TrainPs = TrainRuns;

nlohmann::json ps_summary(const fs::path& metrics) { return metrics_entry(metrics, "parameter_server"); }

TEST_F(TrainPs, BspEqualsDataParallelismOnTheSameGlobalBatch) {
  const std::string m = std::string(kMlp) + " --steps 4 --batch-size 8 --nproc 4";
  ok(train(m + out("mlp_dp")));
  Result ps = train(m + " --ps-servers 2 --staleness 0" + out("mlp_ps"));
  ok(ps);
  EXPECT_NE(ps.out.find("layout parameter server: 4 workers (ranks 0-3), 2 servers (ranks 4-5), staleness 0 (BSP)"),
            std::string::npos) << ps.out;
  EXPECT_NE(ps.out.find("worker 3: 4 pushes, mean 0, max 0 {0: 4}"), std::string::npos) << ps.out;
  const std::string g = std::string(kGpt) + " --steps 4 --batch-size 2 --nproc 4";
  ok(train(g + out("gpt_dp")));
  ok(train(g + " --ps-servers 2" + out("gpt_ps")));
  for (const char* model : {"mlp", "gpt"}) {
    const double d = max_weight_diff(std::string(model) + "_dp", std::string(model) + "_ps");
    std::cout << "[ equivalence ] " << model << " data parallelism vs BSP: max |weight difference| " << d << "\n";
    EXPECT_LE(d, 1e-6) << model;
  }
  nlohmann::json s = ps_summary(dir_ / "mlp_ps" / "metrics.jsonl");
  ASSERT_TRUE(s.is_object());
  EXPECT_EQ(s["workers"].size(), 4u);
  // Pull and push each move the whole model: 669,706 floats each way, plus headers.
  EXPECT_NEAR(s["bytes_sent_per_step"].get<double>(), 669706.0 * 4, 200);
  EXPECT_NEAR(s["bytes_received_per_step"].get<double>(), 669706.0 * 4, 200);

  // The memory report holds worker 0 and every server (Note [A parameter
  // server's memory]): the worker's copy of the servers' elements is its
  // communication; each server its shard, the gradient of it, SGD's
  // momentum of it, and a push and a pull's snapshot for each of 4 workers.
  const nlohmann::json memory = metrics_entry(dir_ / "mlp_ps" / "metrics.jsonl", "memory");
  ASSERT_EQ(memory.size(), 3u) << memory;
  EXPECT_FALSE(memory[0].contains("process"));
  EXPECT_EQ(memory[0]["communication"].get<int64_t>(), 669706 * 4);
  EXPECT_EQ(memory[0]["optimizer_state"].get<int64_t>(), 0);
  int64_t held = 0;
  for (int server = 0; server < 2; ++server) {
    const nlohmann::json& m = memory[server + 1];
    EXPECT_EQ(m["process"], "server " + std::to_string(server));
    const int64_t shard = m["parameters"].get<int64_t>();
    held += shard;
    EXPECT_EQ(m["gradients"].get<int64_t>(), shard);
    EXPECT_EQ(m["optimizer_state"].get<int64_t>(), shard);
    EXPECT_EQ(m["communication"].get<int64_t>(), 2 * 4 * shard);
    EXPECT_GT(m["peak_resident"].get<int64_t>(), 11 * shard);
  }
  EXPECT_EQ(held, 669706 * 4);
  EXPECT_NE(ps.out.find("server 1"), std::string::npos) << ps.out;
}

// The word-level LM's table moves by the rows a step reads: still the
// weights data parallelism computes, for a fraction of the bytes.
TEST_F(TrainPs, SparseTablesMoveByRowsAndStillEqualDataParallelism) {
  const std::string m =
      "--model wordlm --n-embd 16 --n-head 2 --block-size 8 --batch-size 2 --steps 3 --eval-batches 1 --threads 1 "
      "--data-order sequential --seed 3 --nproc 4";
  ok(train(m + out("wordlm_dp")));
  Result sparse = train(m + " --ps-servers 2" + out("wordlm_sparse"));
  ok(sparse);
  EXPECT_NE(sparse.out.find("the sparse tables' rows the step reads"), std::string::npos) << sparse.out;
  ok(train(m + " --ps-servers 2 --ps-sparse false" + out("wordlm_dense")));
  const double d = max_weight_diff("wordlm_dp", "wordlm_sparse");
  std::cout << "[ equivalence ] wordlm data parallelism vs BSP with sparse rows: max |weight difference| " << d << "\n";
  EXPECT_LE(d, 1e-6);
  EXPECT_LE(max_weight_diff("wordlm_dp", "wordlm_dense"), 1e-6);
  const double dense = ps_summary(dir_ / "wordlm_dense" / "metrics.jsonl")["bytes_received_per_step"].get<double>();
  const double rows = ps_summary(dir_ / "wordlm_sparse" / "metrics.jsonl")["bytes_received_per_step"].get<double>();
  std::cout << "[ bytes ] wordlm pulls per worker per step: dense " << dense << ", sparse " << rows << "\n";
  // The table is 14,565 x 16 of the model's 14,565 x 49 + 3,856 floats; a step reads at most 16 of its rows.
  EXPECT_NEAR(dense, (14565.0 * 49 + 3952) * 4, 400);
  EXPECT_NEAR(rows, (14565.0 * 33 + 3952) * 4, 16 * 16 * 4 + 400);
}

#ifdef ARTEL_MPIEXEC
TEST_F(TrainPs, RolesComeFromTheRankUnderMpirun) {
  const std::string m = std::string(kMlp) + " --steps 3 --batch-size 16";
  ok(train(m + " --nproc 2" + out("dp")));
  std::string mpirun = std::string(ARTEL_MPIEXEC) + " --allow-run-as-root --oversubscribe -np 3 ";
  Result ps = train(m + " --backend mpi --ps-servers 1" + out("ps"), "", mpirun);
  ok(ps);
  EXPECT_NE(ps.out.find("2 workers (ranks 0-1), 1 server (rank 2)"), std::string::npos) << ps.out;
  EXPECT_LE(max_weight_diff("dp", "ps"), 1e-6);
}
#endif

// --trace gathers every worker's and every server's timeline into one file:
// the workers' pulls and pushes, each server's applied pushes per worker.
TEST_F(TrainPs, TraceHoldsEveryWorkerAndEveryServer) {
  const std::string m = std::string(kMlp) + " --steps 3 --batch-size 8 --nproc 2 --ps-servers 2 --staleness 1";
  ok(train(m + " --trace " + (dir_ / "t.json").string() + out("run")));
  auto j = nlohmann::json::parse(slurp(dir_ / "t.json"));
  std::map<int, std::string> names;
  std::map<std::string, int> count;  // "worker 0 pull", "server 1 apply push", ...
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name") names[e["pid"].get<int>()] = e["args"]["name"];
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "X") ++count[names[e["pid"].get<int>()] + " " + e["name"].get<std::string>()];
  EXPECT_EQ(names.size(), 4u);
  for (const char* w : {"worker 0", "worker 1"}) {
    EXPECT_GE(count[std::string(w) + " pull"], 3) << w;
    EXPECT_EQ(count[std::string(w) + " push"], 3) << w;
    EXPECT_EQ(count[std::string(w) + " backward"], 3) << w;
  }
  for (const char* s : {"server 0", "server 1"}) EXPECT_EQ(count[std::string(s) + " apply push"], 2 * 3) << s;
}

TEST_F(TrainPs, SspDropsAKilledWorkerAndTheOthersFinish) {
  const std::string m = std::string(kMlp) + " --steps 12 --batch-size 8 --nproc 4 --ps-servers 2 --staleness 2";
  Result r = train(m + out("run"), "ARTEL_TEST_FAULT=kill@2:4");
  ok(r);
  EXPECT_NE(r.err.find("worker 2 was killed by signal SIGKILL"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the job goes on without it"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("dropped worker 2 (rank 2) at clock"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("; dropped at clock"), std::string::npos) << r.out;
  nlohmann::json s = ps_summary(dir_ / "run" / "metrics.jsonl");
  ASSERT_TRUE(s.is_object());
  EXPECT_TRUE(s["workers"][2].contains("dropped_at_clock")) << s.dump();
  EXPECT_EQ(s["workers"][0]["pushes"].get<int>(), 12);
  EXPECT_TRUE(fs::exists(dir_ / "run" / "final.safetensors"));
}

// Worker 0 writes the run's outputs: under SSP the others went on without
// it, and the job exited 0 having written nothing.
TEST_F(TrainPs, SspFailsTheJobWhenWorkerZeroDies) {
  const std::string m = std::string(kMlp) + " --steps 12 --batch-size 8 --nproc 3 --ps-servers 1 --staleness 2";
  Result r = train(m + out("run"), "ARTEL_TEST_FAULT=kill@0:4");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("worker 0 was killed by signal SIGKILL"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("the job goes on without it"), std::string::npos) << r.err;
}

// A worker that stops answering is dropped after --timeout; once the others
// are done the launcher stops it rather than wait for it.
TEST_F(TrainPs, SspDropsAStoppedWorkerAfterTheTimeout) {
  const std::string m =
      std::string(kMlp) + " --steps 10 --batch-size 8 --nproc 3 --ps-servers 1 --staleness 1 --timeout 2";
  Result r = train(m + out("run"), "ARTEL_TEST_FAULT=stop@1:3");
  ok(r);
  // At clock 2 or 3: its step-3 push may still have been on its way when it stopped.
  EXPECT_NE(r.err.find("dropped worker 1 (rank 1) at clock "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(": it sent nothing for the group's timeout (--timeout); 2 workers go on"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("every other rank has finished; stopping worker(s) 1"), std::string::npos) << r.err;
}

// A stopped server under SSP: its workers time out one after the other, and
// once the last has failed the job fails (the launcher waited forever on the
// stopped server, each worker's failure read as a dropped worker's).
TEST_F(TrainPs, SspFailsTheJobWhenEveryWorkerHasFailed) {
  const std::string m =
      std::string(kMlp) + " --steps 6 --batch-size 8 --nproc 2 --ps-servers 1 --staleness 2 --timeout 2";
  Result r = train(m + out("run"), "ARTEL_TEST_FAULT=stop@2:3");
  EXPECT_NE(r.code, 0);
  EXPECT_LT(r.seconds, 60);
  EXPECT_NE(r.err.find("parameter server 0 (rank 2)"), std::string::npos) << r.err;
  // Worker 1 may drop out, but worker 0, which writes the outputs, may not:
  // whichever times out first, the job stops.
  EXPECT_NE(r.err.find("stopping the other 2 workers"), std::string::npos) << r.err;
}

TEST_F(TrainPs, BspFailsTheJobWhenAWorkerDies) {
  const std::string m = std::string(kMlp) + " --steps 12 --batch-size 8 --nproc 2 --ps-servers 1";
  Result r = train(m + out("run"), "ARTEL_TEST_FAULT=kill@1:3");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("worker 1 was killed by signal SIGKILL"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("stopping the other"), std::string::npos) << r.err;
}

// The servers write their shards and optimizer state into the run's
// checkpoints; a job restarted after a worker or a server died resumes from
// them to the weights of a run that never stopped, bit for bit (BSP).
TEST_F(TrainPs, BspResumesExactlyFromTheServersCheckpoints) {
  const std::string m =
      std::string(kMlp) + " --optimizer adamw --lr 0.001 --steps 6 --batch-size 8 --nproc 4 --ps-servers 2 --checkpoint-every 3";
  ok(train(m + out("whole")));
  EXPECT_TRUE(fs::exists(dir_ / "whole" / "checkpoints" / "ckpt-00000003" / "manifest.json"));
  // Worker 1 dies after step 5: its step 5 needed worker 0's step 4, so worker 0
  // had committed the checkpoint of step 3 (a worker killed after step 4 may
  // beat that commit, and the run would rightly start over).
  Result worker = train(m + " --max-restarts 1" + out("worker"), "ARTEL_TEST_FAULT=kill@1:5");
  ok(worker);
  EXPECT_NE(worker.out.find("resuming from"), std::string::npos) << worker.out;
  Result server = train(m + " --max-restarts 1" + out("server"), "ARTEL_TEST_FAULT=kill@5:4");
  ok(server);
  EXPECT_NE(server.err.find("parameter server 1 (rank 5) was killed"), std::string::npos) << server.err;
  EXPECT_NE(server.out.find("resuming from"), std::string::npos) << server.out;
  for (const char* run : {"worker", "server"}) {
    const double d = max_weight_diff("whole", run);
    std::cout << "[ resume ] BSP, " << run << " killed, resumed from step 3: max |weight difference| " << d
              << "\n";
    EXPECT_EQ(d, 0.0) << run;
  }
  // Without restarts a dead server ends the job, naming it.
  Result dead = train(m + out("dead"), "ARTEL_TEST_FAULT=kill@4:2");
  EXPECT_NE(dead.code, 0);
  EXPECT_NE(dead.err.find("parameter server 0 (rank 4)"), std::string::npos) << dead.err;
}

// A run's config.json trains the same run again (README: `--config run.json`).
// A parameter-server run recorded ZeRO's data-parallel default, 1, and its
// own config was then refused as "--zero with --ps-servers".
TEST_F(TrainPs, ARunsConfigFileRunsItAgain) {
  const std::string m = std::string(kMlp) + " --steps 2 --nproc 2 --ps-servers 1";
  ok(train(m + out("first")));
  const nlohmann::json cfg = nlohmann::json::parse(slurp(dir_ / "first" / "config.json"));
  EXPECT_EQ(cfg["zero"], 0);  // the servers shard the optimizer state, not ZeRO
  ok(train("--config " + (dir_ / "first" / "config.json").string() + " --nproc 2" + out("again")));  // a launch flag
  EXPECT_EQ(max_weight_diff("first", "again"), 0.0);
  ok(train(m + " --zero 0" + out("zero0")));  // asking for no ZeRO stage is no conflict
}

TEST_F(TrainPs, SettingsItCannotHonourAreRefusedInOneLine) {
  const std::string m = std::string(kMlp) + " --steps 2 --nproc 2 --ps-servers 1";
  auto refused = [&](const std::string& args, const std::string& env, const std::string& says) {
    Result r = train(m + " " + args + out("bad"), env);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_NE(r.err.find(says), std::string::npos) << args << ": " << r.err;
    if (env.empty()) {  // refused before any worker starts
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
  };
  refused("--staleness soon", "", "--staleness 'soon' is not a clock count");
  refused("--staleness -2", "", "--staleness '-2' is not a clock count");
  refused("--zero 2", "", "--zero 2 with --ps-servers");
  refused("--micro-batches 2 --batch-size 4", "", "--ps-servers with --tp / --pp / --micro-batches");
  refused("", "ARTEL_TEST_SLOW=fast", "ARTEL_TEST_SLOW='fast' is malformed");  // said by every worker
  refused("", "ARTEL_TEST_SLOW=turns:0.5", "ARTEL_TEST_SLOW='turns:0.5' is malformed");
}

}  // namespace
