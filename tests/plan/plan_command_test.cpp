// `artel plan` through the real program: a prediction and a search as JSON,
// and bad input as one line on stderr with a non-zero exit.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "artel/data/char_text.h"
#include "artel/train/train_config.h"

namespace {

namespace fs = std::filesystem;

struct Result {
  int code = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result plan(const std::string& args, int timeout_s = 60) {
  const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const fs::path dir = fs::path(::testing::TempDir()) / ("artel_plan_" + test + "_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string cmd = "cd " + std::string(ARTEL_SOURCE_DIR) + " && timeout " + std::to_string(timeout_s) + " " + ARTEL_BINARY + " plan " + args +
                          " >" + (dir / "stdout").string() + " 2>" + (dir / "stderr").string();
  const int status = std::system(cmd.c_str());
  Result r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir / "stdout"), slurp(dir / "stderr")};
  fs::remove_all(dir);
  return r;
}

// Runs `artel train ARGS --out OUT` (quietly) and returns the largest
// `kind` (parameters, activations, ...) any worker's memory record in its
// metrics.jsonl holds; -1 when the run failed.
double trained_peak(const std::string& args, const fs::path& out, const std::string& kind) {
  fs::remove_all(out);
  const std::string train = "cd " + std::string(ARTEL_SOURCE_DIR) + " && timeout 300 " + ARTEL_BINARY + " train " +
                            args + " --out " + out.string() + " >/dev/null 2>&1";
  if (std::system(train.c_str()) != 0) return -1;
  double peak = 0;
  std::ifstream metrics(out / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("memory"))
      for (const nlohmann::json& worker : j["memory"]) peak = std::max(peak, worker[kind].get<double>());
  }
  return peak;
}

const std::string kGpt2 = "--preset gpt2 --cluster data/clusters/selene.json --workers 8 --global-batch 32 ";

TEST(PlanCommand, PredictsOneLayoutAsJson) {
  const Result r = plan(kGpt2 + "--tp 2 --micro-batches 2 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["layout"]["dp"], 4);
  EXPECT_EQ(j["layout"]["tp"], 2);
  EXPECT_EQ(j["layout"]["layers_per_stage"], nlohmann::json::parse("[[0, 12]]"));
  EXPECT_GT(j["time"]["step_s"].get<double>(), 0);
  EXPECT_GT(j["time"]["tensor_parallel_s"].get<double>(), 0);
  EXPECT_GT(j["memory"]["parameters"].get<double>(), 0);
  EXPECT_TRUE(j["memory"]["fits"].get<bool>());
}

TEST(PlanCommand, PrintsTheBreakdownAsText) {
  const Result r = plan(kGpt2 + "--pp 2 --micro-batches 4 --schedule gpipe");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* line : {"step time", "pipeline bubble", "data-parallel comm", "optimizer state", "activations"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << " missing from:\n" << r.out;
  }
}

TEST(PlanCommand, PredictsAUsersModelFromPerLayerCosts) {
  const Result r = plan(
      "--model-costs tests/plan/data/mlp_costs.json --cluster data/clusters/selene.json --workers 8 "
      "--global-batch 256 --pp 2 --micro-batches 4 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["layout"]["dp"], 4);
  // Cut where the parameters balance: fc1 + fc2 (1.85 M) against fc3 + fc4 (1.06 M).
  EXPECT_EQ(j["layout"]["layers_per_stage"], nlohmann::json::parse("[[0, 2], [2, 4]]"));
  EXPECT_GT(j["time"]["bubble_s"].get<double>(), 0);
  EXPECT_GT(j["memory"]["activations"].get<double>(), 0);
}

// Any model `artel train` builds is planned: its costs measured on its data.
// Saved as a costs file, they plan to the same prediction (given the same
// optimizer state: a file does not say which optimizer trains it).
TEST(PlanCommand, MeasuresTheCostsOfAnyModelArtelTrains) {
  const fs::path costs = fs::temp_directory_path() / ("artel_measured_costs_" + std::to_string(::getpid()) + ".json");
  const std::string layout = " --cluster data/clusters/selene.json --workers 8 --global-batch 64 --json";
  for (const char* model : {"mlp", "cnn", "wordlm"}) {
    const std::string measured_model = std::string("--model ") + model + layout;
    const Result measured = plan(measured_model + " --zero 1 --state mixed --save-model-costs " + costs.string());
    ASSERT_EQ(measured.code, 0) << model << ": " << measured.err;
    const nlohmann::json file = nlohmann::json::parse(slurp(costs));
    EXPECT_EQ(file["name"], model);
    EXPECT_GE(file["layers"].size(), 1u) << model;
    const Result again = plan("--model-costs " + costs.string() + layout + " --zero 1 --state mixed");
    ASSERT_EQ(again.code, 0) << again.err;
    const nlohmann::json a = nlohmann::json::parse(measured.out), b = nlohmann::json::parse(again.out);
    EXPECT_EQ(a["time"], b["time"]) << model;
    EXPECT_EQ(a["memory"], b["memory"]) << model;
    EXPECT_GT(a["memory"]["activations"].get<double>(), 0) << model;
    // artel's own state is the run's optimizer's: the MLP and the CNN train
    // with SGD's momentum (4 bytes a parameter), the word LM with AdamW (8).
    const nlohmann::json own = nlohmann::json::parse(plan(measured_model).out)["memory"];
    EXPECT_EQ(own["optimizer_state"].get<double>(),
              (std::string(model) == "wordlm" ? 2 : 1) * own["parameters"].get<double>()) << model;
  }
  fs::remove(costs);
  // Pipeline stages cut between the measured layers where `artel train`
  // cuts them, by parameters: the CNN's 12 over 4 stages, and the MLP's 5
  // (3 Linears, 2 ReLUs) over 2 as `artel train --model mlp --pp 2` runs it.
  EXPECT_EQ(plan("--model cnn --pp 4 --micro-batches 4" + layout).code, 0);
  const Result uneven = plan("--model mlp --pp 2 --cluster data/clusters/selene.json --workers 8 --global-batch 64");
  EXPECT_EQ(uneven.code, 0) << uneven.err;
  EXPECT_NE(uneven.out.find("layers per stage [0,1) [1,5) (balanced by parameters, as artel train cuts)"),
            std::string::npos)
      << uneven.out;
  const Result too_many = plan("--model mlp --pp 8 --cluster data/clusters/selene.json --workers 8 --global-batch 64");
  EXPECT_EQ(too_many.code, 1);
  EXPECT_NE(too_many.err.find("pp 8 stages for the model's 5 layers: every stage needs one"), std::string::npos)
      << too_many.err;
  // The interleaved schedule's chunks are cut as `artel train --schedule
  // interleaved` cuts them: P·V of them balanced by parameters, stage s
  // holding chunks s, s + P, ...
  const Result chunks = plan("--model mlp --pp 2 --schedule interleaved --chunks 2 --micro-batches 2 --cluster "
                             "data/clusters/selene.json --workers 8 --global-batch 64");
  EXPECT_EQ(chunks.code, 0) << chunks.err;
  EXPECT_NE(chunks.out.find("layers per stage [0,1)+[2,3) [1,2)+[3,5) (balanced by parameters"), std::string::npos)
      << chunks.out;
  // --search ranks only what `artel train --model cnn` accepts, the
  // interleaved schedule among them.
  const Result search = plan("--model cnn --cluster data/clusters/selene.json --workers 8 --global-batch 512 --search "
                             "--top 1000 --json");
  ASSERT_EQ(search.code, 0) << search.err;
  const nlohmann::json ranked = nlohmann::json::parse(search.out);
  EXPECT_GT(ranked.size(), 10u);
  EXPECT_TRUE(std::any_of(ranked.begin(), ranked.end(),
                          [](const nlohmann::json& r) { return r["layout"]["schedule"] == "interleaved"; }));
}

// A measured model's tensor-parallel split is planned as `artel train
// --tp 2` holds it, and its selective cores as --recompute selective reruns them: the parameters one worker holds are the run's own, to
// the byte, for the word LM (its blocks split) and the MLP (its first two
// Linears). A tp its split does not divide into, or a model that declares
// none, is refused as `artel train` refuses it.
TEST(PlanCommand, AMeasuredModelsTensorParallelSplitAndCoresAreWhatTrainingRuns) {
  const fs::path out = fs::path(::testing::TempDir()) / ("artel_plan_tp_run_" + std::to_string(::getpid()));
  for (const std::string model : {"wordlm", "mlp"}) {
    const double held =
        trained_peak("--model " + model + " --nproc 2 --tp 2 --steps 1 --batch-size 8 --eval-every 0", out, "parameters");
    ASSERT_GT(held, 0) << model;
    const Result p = plan("--model " + model + " --tp 2 --cluster data/clusters/selene.json --workers 2 "
                          "--global-batch 8 --json");
    ASSERT_EQ(p.code, 0) << p.err;
    const nlohmann::json j = nlohmann::json::parse(p.out);
    EXPECT_EQ(j["memory"]["parameters"].get<double>(), held) << model;
    EXPECT_GT(j["time"]["tensor_parallel_s"].get<double>(), 0) << model;
  }
  fs::remove_all(out);
  const std::string on8 = " --cluster data/clusters/selene.json --workers 8 --global-batch 64";
  const Result eight = plan("--model wordlm --tp 8" + on8);
  EXPECT_EQ(eight.code, 1);
  EXPECT_NE(eight.err.find("tp 8 does not divide wordlm's tensor-parallel split (hint: choose a tp its split "
                           "divides into: 2, 4)"),
            std::string::npos)
      << eight.err;
  const Result none = plan("--model cnn --tp 2" + on8);
  EXPECT_EQ(none.code, 1);
  EXPECT_NE(none.err.find("cnn splits nothing over tensor-parallel ranks"), std::string::npos) << none.err;
  // Selective recomputation: the word LM's attention cores, as artel train
  // --recompute selective runs them (two blocks: one's scores are rebuilt
  // while the other's are not kept); the MLP marks no core.
  const std::string two = "--model wordlm --n-layer 2 --json" + on8;
  const nlohmann::json sel = nlohmann::json::parse(plan(two + " --recompute selective").out);
  const nlohmann::json kept = nlohmann::json::parse(plan(two).out);
  EXPECT_GT(sel["time"]["recompute_s"].get<double>(), 0);
  EXPECT_LT(sel["memory"]["activations"].get<double>(), kept["memory"]["activations"].get<double>());
  const Result mlp = plan("--model mlp --recompute selective" + on8);
  EXPECT_EQ(mlp.code, 1);
  EXPECT_NE(mlp.err.find("mlp's costs mark none (hint: use --recompute none or full)"), std::string::npos) << mlp.err;
}

// A cost beyond any layer (10^300 parameters) is a typing slip: refused
// with the file, the layer and the key, not planned into 60-digit figures.
// A cost beyond any model, a value of the wrong type, a misspelt key: each
// refused in one line that names the file, the layer and the key.
TEST(PlanCommand, RefusesModelCostsItCannotTrust) {
  const fs::path costs = fs::temp_directory_path() / ("artel_bad_costs_" + std::to_string(::getpid()) + ".json");
  const std::string layer = R"("forward_flops": 1e9, "activation_bytes": 1, "output_bytes": 1)";
  const std::pair<std::string, std::string> cases[] = {
      {R"({"layers": [{"parameters": 1e300, )" + layer + "}]}",
       R"(: layers[0]: "parameters" must be in [0, 1e18], got 1e+300)"},
      {R"({"name": 5, "layers": [{"parameters": 1, )" + layer + "}]}", R"(: "name" must be a string, got number 5)"},
      {R"({"layers": [{"parameters": 1, "name": ["fc1"], )" + layer + "}]}",
       R"(: layers[0]: "name" must be a string, got array ["fc1"])"},
      {R"({"layers": [{"parameter": 1, )" + layer + "}]}", R"(: layers[0]: unknown key "parameter")"},
      {R"({"layers": [{"parameters": 1, "split_parameters": 2, )" + layer + "}]}",
       R"(: layers[0]: "split_parameters" (2) is more than "parameters" (1))"},
      {R"({"tensor_parallel_degrees": [1, 2], "layers": [{"parameters": 1, )" + layer + "}]}",
       R"(: "tensor_parallel_degrees" holds integers from 2, like [2, 4], got 1)"},
  };
  for (const auto& [text, what] : cases) {
    std::ofstream(costs) << text;
    const Result r = plan("--model-costs " + costs.string() + " --cluster data/clusters/selene.json --global-batch 8");
    EXPECT_EQ(r.code, 1) << text;
    EXPECT_NE(r.err.find(costs.string() + what), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  fs::remove(costs);
}

TEST(PlanCommand, SearchRanksLayoutsFastestFirst) {
  const Result r = plan(kGpt2 + "--search --top 5 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 5u);
  for (size_t i = 1; i < j.size(); ++i) {
    EXPECT_LE(j[i - 1]["time"]["step_s"].get<double>(), j[i]["time"]["step_s"].get<double>());
  }
}

TEST(PlanCommand, ModelGptIsTheGptArtelTrainTrainsByDefault) {
  // W2 without a dimension typed: the same prediction as its dimensions
  // spelled out from train's defaults and the bundled text's vocabulary.
  const artel::train::TrainConfig c = artel::train::default_config("gpt");
  const int64_t chars = artel::data::load_char_text(std::string(ARTEL_SOURCE_DIR) + "/data/tinyshakespeare.txt").vocab.size();
  const std::string cluster = " --cluster data/clusters/selene.json --workers 8 --global-batch 96 --json";
  const Result w2 = plan("--model gpt" + cluster);
  const Result spelled = plan("--n-layer " + std::to_string(c.n_layer) + " --n-head " + std::to_string(c.n_head) +
                              " --n-embd " + std::to_string(c.n_embd) + " --seq " + std::to_string(c.block_size) +
                              " --vocab " + std::to_string(chars) + " --vocab-multiple " +
                              std::to_string(c.vocab_multiple) + cluster);
  ASSERT_EQ(w2.code, 0) << w2.err;
  ASSERT_EQ(spelled.code, 0) << spelled.err;
  EXPECT_EQ(nlohmann::json::parse(w2.out), nlohmann::json::parse(spelled.out));
}

// The activations artel's memory report measures in a short run (the most
// on any worker) against what `artel plan` predicts for the same layout under
// artel's accounting: within 10% with and without recomputation and under
// tp (with sequence parallelism too), for W2 (costs from its shape) and the measured models (their pieces'
// kept bytes, the loss's logits gradient and the gradients in flight).
TEST(PlanCommand, ActivationsOfEachModelMatchTheMemoryReportOfARun) {
  const fs::path out = fs::path(::testing::TempDir()) / ("artel_plan_activations_run_" + std::to_string(::getpid()));
  const fs::path cluster =
      fs::path(::testing::TempDir()) / ("artel_plan_activations_host_" + std::to_string(::getpid()) + ".json");
  {  // one host of 2 workers: the rates do not enter the memory
    const nlohmann::json link = {{"alpha", 1e-6}, {"beta", 1e10}};
    std::ofstream(cluster) << nlohmann::json{
        {"name", "host"}, {"hosts", 1}, {"workers_per_host", 2},
        {"device", {{"name", "cpu"}, {"peak_flops", {{"fp32", 1e11}, {"bf16", 2e11}}}, {"gemm_efficiency", 1.0},
                    {"memory_bytes", 16e9}, {"memory_bandwidth", 1e10}, {"memory_efficiency", 1.0}}},
        {"links", {{"intra_host", link}, {"inter_host", link}}}};
  }
  const std::pair<const char*, const char*> cases[] = {
      {"gpt", ""},          {"gpt", "--recompute selective"}, {"gpt", "--recompute full"},
      {"gpt", "--tp 2"},    {"gpt", "--tp 2 --sequence-parallel"}, {"gpt", "--tp 2 --sequence-parallel --dropout 0.1"},
      {"mlp", ""},                      {"mlp", "--recompute full"},     {"mlp", "--tp 2"},
      {"cnn", ""},          {"cnn", "--recompute full"},      {"wordlm", ""},
      {"wordlm", "--tp 2"}, {"wordlm", "--n-layer 2 --recompute selective"}};
  for (const auto& [model, flags] : cases) {
    const std::string layout = std::string("--model ") + model + " " + flags;
    const bool tp = std::string(flags).find("--tp") == 0;
    const double measured = trained_peak("--steps 2 --batch-size 8 --eval-batches 1 --eval-every 0 --generate 0 " +
                                             layout + (tp ? " --nproc 2" : ""),
                                         out, "activations");
    ASSERT_GT(measured, 0) << layout;
    const Result p = plan("--cluster " + cluster.string() + " --workers " + (tp ? "2" : "1") +
                          " --global-batch 8 --json " + layout);
    ASSERT_EQ(p.code, 0) << p.err;
    const double predicted = nlohmann::json::parse(p.out)["memory"]["activations"].get<double>();
    EXPECT_NEAR(predicted / measured, 1.0, 0.10) << layout << ": predicted " << predicted << " B, measured " << measured;
  }
  fs::remove_all(out);
  fs::remove(cluster);
}

TEST(PlanCommand, BadInputIsOneLineAndANonZeroExit) {
  const std::pair<std::string, std::string> cases[] = {
      {"--preset gpt5 --cluster data/clusters/selene.json --global-batch 8", "unknown preset"},
      {"--preset gpt2 --cluster no/such/cluster.json --global-batch 8", "cluster file no/such/cluster.json does not exist"},
      {kGpt2 + "--dp 3 --tp 2", "dp·tp·pp"},
      {kGpt2 + "--tp 8", "does not divide the 12 attention heads"},
      {kGpt2 + "--grad-compression zip", "unknown gradient compression"},
      {"--model-costs no/such/costs.json --cluster data/clusters/selene.json --global-batch 8",
       "model-costs file no/such/costs.json does not exist"},
      {kGpt2 + "--n-layer 0", "n_layer must be in [1, 100000], got 0"},
      {kGpt2 + "--search --top -1", "--top: must be > 0, got -1"},
      {kGpt2 + "--dropout 2", "dropout must be in [0, 1), got 2"},
      {kGpt2 + "--pp 2 --schedule interleaved --chunks 0", "needs chunks >= 2 per stage, got 0"},
      {"--model mlp --preset gpt2 --cluster data/clusters/selene.json --global-batch 8",
       "--preset is a GPT's shape, not --model mlp's"},
      {"--model rnn --cluster data/clusters/selene.json --global-batch 8", "unknown model 'rnn'"},
      {kGpt2 + "--save-model-costs x.json", "a GPT's costs follow from its shape"},
      {"--model mlp --cluster data/clusters/selene.json --global-batch 8 --save-model-costs data",
       "output file data is a directory, not a file (hint: name a file to write inside it)"},
      {"--cluster data/clusters/selene.json --global-batch 8", "no model to plan"},
      // Flags the plan would drop without a word.
      {kGpt2 + "--search --tp 2", "--tp picks one layout, and --search ranks every layout"},
      {kGpt2 + "--powersgd-rank 8", "--powersgd-rank 8 would do nothing: it goes with --grad-compression powersgd"},
      {kGpt2 + "--threads 4", "--threads 4 would do nothing: cluster selene's workers are whole devices"},
      {kGpt2 + "--sequence-parallel", "sequence parallelism splits activations over the tensor-parallel ranks, and "
                                      "tp is 1"},
      {"--model mlp --n-layer 3 --cluster data/clusters/selene.json --global-batch 8",
       "--n-layer would do nothing: it shapes --model gpt or wordlm, not mlp"},
      {"--model wordlm --vocab 100 --cluster data/clusters/selene.json --global-batch 8",
       "--vocab would do nothing: --model wordlm's vocabulary is its --data's"},
      {"--model-costs x.json --seq 8 --cluster data/clusters/selene.json --global-batch 8",
       "--seq shapes a GPT, and --model-costs gives the model whole"},
      // The data a model cannot train on, said as `artel train` says it.
      {"--model mlp --data data/tinyshakespeare.txt --cluster data/clusters/selene.json --global-batch 8",
       "model mlp trains on MNIST, but --data data/tinyshakespeare.txt is a text file"},
      {"--model gpt --data data/mnist-t10k --cluster data/clusters/selene.json --global-batch 8",
       "model gpt trains on a text file, but --data data/mnist-t10k is MNIST"},
  };
  for (const auto& [args, what] : cases) {
    const Result r = plan(args);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_NE(r.err.find(what), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace

namespace {

// `artel plan calibrate` on W2 alone (a few seconds; all three GPTs take
// about 100 s on 2 cores): a cluster file whose every measured number
// says so, which `artel plan` then reads.
TEST(PlanCommand, CalibrateWritesAClusterFileThePlannerReads) {
  const fs::path file =
      fs::path(::testing::TempDir()) / ("artel_plan_calibrated_" + std::to_string(::getpid()) + ".json");
  const Result cal = plan("calibrate --workloads w2 --workers 4 --out " + file.string());
  ASSERT_EQ(cal.code, 0) << cal.err;
  const nlohmann::json c = nlohmann::json::parse(slurp(file));
  EXPECT_EQ(c["workers_per_host"]["value"], 4);
  EXPECT_GE(c["cores_per_host"]["value"].get<double>(), 1);
  ASSERT_FALSE(c["device"]["gemm_table"].empty());
  // Every shape, of W2's steps at each micro-batch size its batch of 12
  // splits into, timed in the same interleaved rounds (Note [Interleaved
  // GEMM rounds]).
  std::set<std::string> rounds, batches;
  for (const nlohmann::json& g : c["device"]["gemm_table"]) {
    EXPECT_GT(g["flops_per_s"].get<double>(), 0);
    const std::string source = g["source"].get<std::string>();
    EXPECT_EQ(source.rfind("measured: ", 0), 0u) << g.dump();
    const size_t median = source.find("median of "), batch = source.find(" at batch ");
    ASSERT_NE(median, std::string::npos) << source;
    ASSERT_NE(batch, std::string::npos) << source;
    rounds.insert(source.substr(median, source.find(" rounds", median) - median));
    batches.insert(source.substr(batch, source.find(',', batch) - batch));
  }
  EXPECT_EQ(rounds.size(), 1u);
  EXPECT_EQ(batches, (std::set<std::string>{" at batch 1", " at batch 2", " at batch 3", " at batch 4", " at batch 6",
                                             " at batch 12"}));
  const int round_count = std::stoi(rounds.begin()->substr(std::string("median of ").size()));
  EXPECT_GE(round_count, 3);
  EXPECT_LE(round_count, 20);
  for (const char* key : {"memory_bandwidth", "runtime_bytes", "runtime_bytes_with_peers"}) {
    EXPECT_GT(c["device"][key]["value"].get<double>(), 0) << key;
    EXPECT_NE(c["device"][key]["source"].get<std::string>().find("artel plan calibrate"), std::string::npos);
  }
  EXPECT_GT(c["links"]["intra_host"]["beta"]["value"].get<double>(), 0);

  const Result p = plan("--model gpt --cluster " + file.string() + " --workers 2 --global-batch 24 --zero 0 --json");
  ASSERT_EQ(p.code, 0) << p.err;
  const nlohmann::json j = nlohmann::json::parse(p.out);
  EXPECT_GT(j["time"]["step_s"].get<double>(), 0);
  // 2 workers on the host, each touching half its peer's gradient buckets, and
  // rank 1 the other half of rank 0's too, through which the weights were
  // broadcast (Note [Peers' registered pages]).
  EXPECT_DOUBLE_EQ(j["memory"]["runtime"].get<double>(),
                   c["device"]["runtime_bytes_with_peers"]["value"].get<double>() +
                       j["memory"]["gradients"].get<double>());
  EXPECT_NE(c["device"]["runtime_bytes_with_peers"]["source"].get<std::string>().find("plan::peer_pages"),
            std::string::npos);
  fs::remove(file);
}

// The 2-host harness (scripts/cluster.sh: network namespaces at 1 Gbit/s):
// the links come from MPI all-reduces through it, the one between hosts
// bounded by the link's rate, and the hosts share this machine's cores.
// "Mpi" in the name: the sanitizer run leaves MPI jobs out (OpenMPI's own leaks).
TEST(PlanCommand, MpiCalibrationMeasuresTheHarnessLinks) {
  const std::string probe = "artel-plan-probe-" + std::to_string(::getpid());  // another suite may probe at once
  if (std::system(("ip netns add " + probe + " >/dev/null 2>&1 && ip netns del " + probe).c_str()) != 0)
    GTEST_SKIP() << "no network namespaces here (needs root and CAP_NET_ADMIN)";
  const fs::path file = fs::path(::testing::TempDir()) / ("artel_plan_harness_" + std::to_string(::getpid()) + ".json");
  // Each rank started through `artel launch`, as a harness of slower hosts
  // does (--cpus-per-worker; docs/PLAN.md): its lines come prefixed "[0] ".
  const std::string launch = std::string(ARTEL_BINARY) +
                             " launch -n 1 -- env -u ARTEL_RANK -u ARTEL_WORLD_SIZE -u ARTEL_LOCAL_RANK -u ARTEL_JOB_ID"
                             " -u ARTEL_NUM_THREADS -u ARTEL_RESTART_COUNT -u ARTEL_CPUS_PER_WORKER";
  const Result cal = plan("calibrate --workloads w2 --workers 2 --hosts 2 --out " + file.string() +
                              " --hosts-command 'bash scripts/cluster.sh --rate 1gbit --ranks {ranks} -- " + launch + "'",
                          /*timeout_s=*/300);
  ASSERT_EQ(cal.code, 0) << cal.err;
  const nlohmann::json c = nlohmann::json::parse(slurp(file));
  EXPECT_EQ(c["hosts"]["value"], 2);
  const double inter = c["links"]["inter_host"]["beta"]["value"].get<double>();
  EXPECT_GT(inter, 10e6);
  EXPECT_LT(inter, 125e6 * 1.05);  // 1 Gbit/s
  EXPECT_GT(c["links"]["intra_host"]["beta"]["value"].get<double>(), inter);
  EXPECT_NE(c["links"]["inter_host"]["beta"]["source"].get<std::string>().find("cluster.sh"), std::string::npos);
  // The link measured by one rank a host, shared by the 2 workers of a host.
  EXPECT_NE(c["links"]["inter_host"]["beta"]["source"].get<std::string>().find("divided by the 2 workers a host"),
            std::string::npos);
  EXPECT_GT(c["device"]["runtime_bytes"]["value"].get<double>(), 0);
  EXPECT_NE(c["device"]["runtime_bytes"]["source"].get<std::string>().find("plan::hierarchical_scratch"),
            std::string::npos);
  const Result p = plan("--model gpt --cluster " + file.string() + " --workers 4 --global-batch 48 --json");
  ASSERT_EQ(p.code, 0) << p.err;
  // dp 4, 2 a host: the runtime and, for each of the host's 2 ranks, the scratch W2's largest bucket
  // passes through (Note [A hierarchical collective's scratch]). DDP's first bucket closes at mlp.c_proj's
  // weight of the third block (264,192 floats); the second holds the other 545,664 (2.08 MiB), over the
  // two 1 MiB halves, so each rank stages 2 MiB; ZeRO-0, so no reordering.
  const nlohmann::json j = nlohmann::json::parse(p.out);
  EXPECT_DOUBLE_EQ(j["memory"]["runtime"].get<double>(),
                   c["device"]["runtime_bytes"]["value"].get<double>() + 2 * 2.0 * (1 << 20));
  fs::remove(file);
}

// Where the file cannot go is said before anything is measured: here the
// hosts' command would fail first were the calibration to start.
TEST(PlanCommand, CalibrateRefusesAnUnwritableOutputBeforeMeasuring) {
  const Result r = plan("calibrate --workloads w2 --hosts 2 --hosts-command 'false {ranks}' --out /nonexistent-folder/c.json");
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("cannot write cluster file /nonexistent-folder/c.json"), std::string::npos) << r.err;
}

TEST(PlanCommand, CalibrateRefusesBadFlagsInOneLine) {
  for (const std::string args : {"calibrate --workers -2", "calibrate --workloads w9", "calibrate --hosts 2",
                                  "calibrate --hosts 0", "calibrate --hosts 2 --hosts-command 'scripts/cluster.sh --'",
                                  "calibrate --hosts-command 'scripts/cluster.sh --ranks {ranks} --'"}) {
    const Result r = plan(args);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
