// `artel train` end to end, through the real program: tiny runs (seconds)
// that check the files a run writes, --init, --config, and that bad input is
// one line on stderr and a non-zero exit before any work.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "artel/nn/safetensors.h"
#include "cli/train_runs.h"

namespace {

namespace fs = std::filesystem;

using artel_test::Result;
using artel_test::slurp;

class TrainCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("artel_train_cmd_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `artel ARGS` (never longer than two minutes) from the temp dir,
  // with `env` (VAR=value ...) added to its environment.
  Result artel(const std::string& args, const std::string& env = "") {
    std::string cmd = "cd " + dir_.string() + " && env " + env + " timeout 120 " + ARTEL_BINARY + " " + args + " >" +
                      (dir_ / "stdout").string() + " 2>" + (dir_ / "stderr").string();
    int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir_ / "stdout"), slurp(dir_ / "stderr")};
  }
  Result train(const std::string& args) { return artel("train " + args); }

  // A GPT small enough to train 3 steps in well under a second.
  std::string tiny_gpt(const std::string& out) const {
    return "--n-layer 1 --n-head 2 --n-embd 16 --block-size 8 --batch-size 4 --eval-batches 2 --threads 1 "
           "--generate 0 --out " + (dir_ / out).string();
  }

  static std::vector<nlohmann::json> metrics(const fs::path& run) {
    std::ifstream in(run / "metrics.jsonl");
    std::vector<nlohmann::json> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
    return lines;
  }

  // Bad input: a non-zero exit with exactly one line on stderr holding `needle`, and no run started.
  void expect_one_line_error(const std::string& args, const std::string& needle) {
    Result r = train(args);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << "\nstderr: " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\nstderr: " << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "bad" / "metrics.jsonl")) << args;
  }

  fs::path dir_;
};

TEST_F(TrainCommand, TinyGptWritesMetricsAndWeights) {
  Result r = train(tiny_gpt("run") + " --steps 3");
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<nlohmann::json> lines = metrics(dir_ / "run");
  ASSERT_EQ(lines.size(), 5u);  // 3 steps, the final evaluation, the memory report
  const nlohmann::json& memory = lines[4]["memory"][0];  // bytes: AdamW keeps two moments per weight
  EXPECT_GT(memory["parameters"].get<int64_t>(), 0);
  EXPECT_EQ(memory["optimizer_state"].get<int64_t>(), 2 * memory["parameters"].get<int64_t>());
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(lines[k]["step"], k + 1);
    EXPECT_TRUE(lines[k]["loss"].is_number());
    EXPECT_EQ(lines[k]["lr"], 0.001);
    EXPECT_GT(lines[k]["tokens_per_s"].get<double>(), 0);
    EXPECT_GT(lines[k]["step_ms"].get<double>(), 0);
  }
  EXPECT_NEAR(lines[0]["loss"].get<double>(), std::log(65.0), 0.2);  // ~uniform over the vocabulary at init
  EXPECT_EQ(lines[3]["step"], 3);
  EXPECT_TRUE(lines[3]["val_loss"].is_number());
  EXPECT_FALSE(lines[3].contains("val_accuracy"));
  for (const char* f : {"init.safetensors", "final.safetensors", "config.json", "report.svg"})
    EXPECT_TRUE(fs::exists(dir_ / "run" / f)) << f;
  auto init = artel::nn::read_safetensors((dir_ / "run" / "init.safetensors").string());
  auto final = artel::nn::read_safetensors((dir_ / "run" / "final.safetensors").string());
  ASSERT_TRUE(init.tensors.count("transformer.wte.weight"));
  EXPECT_EQ(init.tensors.at("transformer.wte.weight").shape(), (artel::Shape{65, 16}));
  EXPECT_NE(init.tensors.at("transformer.wte.weight").to_vector(), final.tensors.at("transformer.wte.weight").to_vector());
  EXPECT_NE(r.out.find("step 3/3"), std::string::npos);
  // `artel report` redraws it, from the run's directory or its metrics file.
  fs::remove(dir_ / "run" / "report.svg");
  const Result report = artel("report " + (dir_ / "run" / "metrics.jsonl").string());
  EXPECT_EQ(report.code, 0) << report.err;
  EXPECT_EQ(report.out, "wrote " + (dir_ / "run" / "report.svg").string() + "\n");
  EXPECT_TRUE(fs::exists(dir_ / "run" / "report.svg"));
  const Result not_a_run = artel("report " + (dir_ / "run" / "final.safetensors").string());
  EXPECT_EQ(not_a_run.code, 1);
  EXPECT_NE(not_a_run.err.find("final.safetensors is a file, not a run directory"), std::string::npos) << not_a_run.err;
}

TEST_F(TrainCommand, InitReproducesARunAndLoadsItsFinalWeights) {
  ASSERT_EQ(train(tiny_gpt("a") + " --steps 3 --data-order sequential --seed 1").code, 0);
  // A different seed would draw other weights: the same losses prove --init was used.
  Result b = train(tiny_gpt("b") + " --steps 3 --data-order sequential --seed 2 --init " + (dir_ / "a" / "init.safetensors").string());
  ASSERT_EQ(b.code, 0) << b.err;
  auto la = metrics(dir_ / "a"), lb = metrics(dir_ / "b");
  ASSERT_EQ(la.size(), lb.size());
  for (size_t i = 0; i < la.size(); ++i) EXPECT_EQ(la[i].value("loss", 0.0), lb[i].value("loss", 0.0)) << i;
  auto fa = artel::nn::read_safetensors((dir_ / "a" / "final.safetensors").string());
  auto fb = artel::nn::read_safetensors((dir_ / "b" / "final.safetensors").string());
  for (const auto& [name, t] : fa.tensors) EXPECT_EQ(t.to_vector(), fb.tensors.at(name).to_vector()) << name;

  ASSERT_EQ(train(tiny_gpt("c") + " --steps 1 --init " + (dir_ / "a" / "final.safetensors").string()).code, 0);
  auto ic = artel::nn::read_safetensors((dir_ / "c" / "init.safetensors").string());
  for (const auto& [name, t] : fa.tensors) EXPECT_EQ(t.to_vector(), ic.tensors.at(name).to_vector()) << name;
}

TEST_F(TrainCommand, ConfigFileWithFlagOverrides) {
  std::ofstream(dir_ / "cfg.json") << R"({"model": "gpt", "n_layer": 1, "n_head": 2, "n_embd": 16, "block_size": 8,
    "batch_size": 4, "steps": 5, "eval_every": 0, "eval_batches": 1, "generate": 0, "threads": 1, "lr": 0.002})";
  Result r = train("--config cfg.json --steps 2 --out run");
  ASSERT_EQ(r.code, 0) << r.err;
  auto lines = metrics(dir_ / "run");
  ASSERT_EQ(lines.size(), 4u);  // 2 steps (the flag won over the file), the final evaluation, the memory report
  EXPECT_EQ(lines[0]["lr"], 0.002);
  auto cfg = nlohmann::json::parse(slurp(dir_ / "run" / "config.json"));
  EXPECT_EQ(cfg["steps"], 2);
  EXPECT_EQ(cfg["n_embd"], 16);
}

// The GEMM library changes only the rounding of the products: the same steps, the same losses to float precision.
TEST_F(TrainCommand, BothGemmLibrariesTrainTheSameSteps) {
  std::vector<double> losses[2];
  for (int i = 0; i < 2; ++i) {
    const std::string lib = i == 0 ? "onednn" : "openblas", out = "run-" + lib;
    Result r = train("--model mlp --steps 3 --batch-size 32 --threads 1 --eval-batches 1 --gemm " + lib + " --out " + out);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find(lib + " GEMM"), std::string::npos) << r.out;
    for (const auto& line : metrics(dir_ / out))
      if (line.contains("loss")) losses[i].push_back(line["loss"].get<double>());
  }
  ASSERT_EQ(losses[0].size(), 3u);
  ASSERT_EQ(losses[1].size(), 3u);
  for (size_t k = 0; k < 3; ++k) EXPECT_NEAR(losses[0][k], losses[1][k], 1e-4 * losses[0][k]) << "step " << k + 1;
}

TEST_F(TrainCommand, MlpReportsValidationAccuracy) {
  Result r = train("--model mlp --steps 2 --batch-size 32 --threads 1 --out run");
  ASSERT_EQ(r.code, 0) << r.err;
  auto lines = metrics(dir_ / "run");
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_TRUE(lines[0].contains("samples_per_s"));
  EXPECT_TRUE(lines[3].contains("memory"));
  EXPECT_GE(lines[2]["val_accuracy"].get<double>(), 0.0);
  EXPECT_LE(lines[2]["val_accuracy"].get<double>(), 1.0);
  EXPECT_NE(r.out.find("val_accuracy"), std::string::npos);
}

TEST_F(TrainCommand, BadInputIsOneLineAndANonZeroExit) {
  std::string out = " --out " + (dir_ / "bad").string();
  expect_one_line_error("--model rnn" + out, "unknown model 'rnn'");
  expect_one_line_error("--batch-size 0" + out, "batch_size must be >= 1, got 0");
  expect_one_line_error("--n-embd -4" + out, "n_embd must be in [1, 1048576]");
  // Refused before anything is allocated per layer (was: the OOM killer at 24 GB).
  expect_one_line_error("--n-layer 2000000000" + out, "n_layer must be in [1, 100000], got 2e+09");
  expect_one_line_error("--grad-all-reduce foo" + out, "unknown all_reduce algorithm 'foo'");
  expect_one_line_error("--init /dev/zero" + out, "safetensors file /dev/zero is not a regular file");
  expect_one_line_error("--config " + dir_.string() + out, "is a directory, not a file");
  expect_one_line_error("--trace /proc/artel-trace.json" + out, "cannot write --trace /proc/artel-trace.json");
  // Flags of a setting this run lacks were accepted and did nothing.
  expect_one_line_error("--staleness 2" + out, "--staleness 2 paces a parameter server's workers, and this run has none");
  expect_one_line_error("--stage-layers 1,1" + out, "--stage-layers 1,1 splits pipeline stages, and this run has one");
  expect_one_line_error("--max-restarts 2" + out, "--max-restarts restarts the workers that artel train starts, and "
                                                  "this run starts none");
  expect_one_line_error("--momentum 0.9" + out, "--momentum 0.9 would do nothing: it goes with --optimizer sgd");
  expect_one_line_error("--model mlp --n-layer 2" + out, "--n-layer 2 would do nothing");
  expect_one_line_error("--bind-to core" + out, "--bind-to core binds the workers that artel train starts, and this "
                                                "run starts none");
  expect_one_line_error("--bogus-flag 3" + out, "--bogus-flag");
  expect_one_line_error("--data-order random" + out, "unknown data_order 'random'");
  expect_one_line_error("--gemm mkl" + out, "unknown gemm 'mkl'");
  expect_one_line_error("--data " + (dir_ / "missing.txt").string() + out, "missing.txt does not exist");
  std::ofstream(dir_ / "unknown.json") << R"({"learning_rate": 1})";
  expect_one_line_error("--config unknown.json" + out, "unknown config key 'learning_rate'");
  expect_one_line_error("--config nowhere.json" + out, "nowhere.json");
  expect_one_line_error("--model gpt --data " + std::string(ARTEL_SOURCE_DIR) + "/data/mnist-t10k" + out,
                        "trains on a text file");
  {
    std::ofstream tokens(dir_ / "tokens.bin", std::ios::binary);
    for (uint16_t id = 0; id < 4096; ++id) tokens.write(reinterpret_cast<const char*>(&id), sizeof id);
  }
  expect_one_line_error("--model mlp --data " + (dir_ / "tokens.bin").string() + out,
                        "model mlp trains on MNIST, but --data " + (dir_ / "tokens.bin").string() + " is a token file");
}

// Ranks that mpirun or srun started share one terminal: each error line is
// written whole (two ranks' lines came out interleaved, "artel artel train:
// error: train...") and says its rank, as PyTorch's "[rank1]:" does. Under
// artel launch, which prefixes every line itself, or alone, it does not.
TEST_F(TrainCommand, AnErrorUnderMpirunOrSrunNamesItsRank) {
  const std::string bad = "--bogus-flag";
  const std::string said = "artel train: error: The following argument was not expected: --bogus-flag";
  EXPECT_EQ(train(bad).err.rfind(said, 0), 0u);
  EXPECT_EQ(artel("train " + bad, "OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2").err.rfind("[rank1]: " + said, 0), 0u);
  EXPECT_EQ(artel("train " + bad, "PMI_RANK=3 PMI_SIZE=4").err.rfind("[rank3]: " + said, 0), 0u);
  EXPECT_EQ(artel("train " + bad, "SLURM_PROCID=0 SLURM_NTASKS=2").err.rfind("[rank0]: " + said, 0), 0u);
  EXPECT_EQ(artel("train " + bad, "SLURM_PROCID=0 SLURM_NTASKS=1").err.rfind(said, 0), 0u) << "one rank: no prefix";
  EXPECT_EQ(artel("train " + bad, "ARTEL_RANK=1 OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2").err.rfind(said, 0), 0u)
      << "artel launch prefixes the lines itself";
}

// The other commands' bad input: one line on stderr that says what, and
// nothing half-said on stdout. `report` printed "wrote " before failing,
// `generate` hinted at a --config nobody gave, and each rank `bench comm`
// forked said the sizes were out of order. A bad number flag printed
// CLI11's range, 0 to the largest double in 309 digits, and `bench comm`
// printed it on two lines and exited 105.
TEST_F(TrainCommand, OtherCommandsSayBadInputInOneLineAndNothingElse) {
  const std::string nowhere = (dir_ / "nowhere").string();
  for (const auto& [args, needle] : std::vector<std::pair<std::string, std::string>>{
           {"report " + nowhere, "metrics.jsonl does not exist"},
           {"generate " + nowhere, "is not a run directory"},
           {"generate " + std::string(ARTEL_SOURCE_DIR) + "/README.md",
            "README.md is a file, not a run directory (hint: pass the --out directory of an `artel train` run; other "
            "weights go with --weights FILE)"},
           {"bench comm -n 2 --min-bytes 10 --max-bytes 5", "--min-bytes <= --max-bytes"},
           {"bench comm -n 2 --max-bytes -1", "cannot read '-1' as a size"},  // was 2^64 - 1, until killed
           {"bench comm -n 2 --max-bytes 99999999999G", "cannot read '99999999999G' as a size"},
           {"bench comm -n 2 --min-bytes 3 --max-bytes 3", "holds no float32 element"},
           // A header and no rows, exit 0: 8 bytes are 2 elements, no block for each of 3 ranks.
           {"bench comm -n 3 --op reduce_scatter --min-bytes 8 --max-bytes 8",
            "no size from 8 to 8 bytes holds a float32 element for each of the 3 ranks, which reduce_scatter needs"},
           {"bench comm -n 100000", "--nproc: Value 100000 not in range 1 to 4096"},
           {"bench comm -n 2 --timeout 0", "--timeout: must be > 0, got 0"},
           {"bench comm -n 2 --iters -1", "--iters: must be >= 0, got -1"},
           {"generate " + nowhere + " --temperature inf", "--temperature: must be a finite number, got inf"},
           {"generate " + nowhere + " --top-k -2", "--top-k: must be >= 0, got -2"},
           {"bench train --steps -3", "--steps takes a count >= 0"},
           {"bench train --timeout -1", "--timeout: must be > 0, got -1"},
           {"bench train --steps 2 --warmup 5", "--warmup 5 leaves none of --steps 2 to time"},
           // Flags the fixed comparisons would drop without a word.
           {"bench train --scaling --zero 1,2", "--scaling and --zero are two comparisons"},
           {"bench train --scaling --threads 2", "--threads would do nothing: --scaling measures 2 workers x 1 thread"},
           {"bench train --zero 1,2 --threads 1,2", "--threads would do nothing: --zero measures"},
           {"bench train --recompute none,full --python python3", "--python would do nothing: --recompute measures"},
           {"bench train --zero 1,3 --gemm onednn,openblas", "--zero measures on one GEMM library, and --gemm gives 2"}}) {
    const Result r = artel(args);
    EXPECT_EQ(r.code, 1) << args;
    EXPECT_EQ(r.out, "") << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << args << ": " << r.err;
  }
  // An unknown command or subject: one line and exit 2, as a bad flag (was the whole usage).
  for (const auto& [args, needle] : std::vector<std::pair<std::string, std::string>>{
           {"bench sideways", "unknown subject 'sideways' (hint: use comm or train)"},
           {"sideways", "unknown command 'sideways' (hint: `artel --help` lists the commands)"},
           {"checkpoint sideways", "unknown subcommand 'sideways' (hint: use `artel checkpoint export CKPT OUT`)"}}) {
    const Result r = artel(args);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_EQ(r.out, "") << args;
    const std::string command = args.find(' ') == std::string::npos ? "" : " " + args.substr(0, args.find(' '));
    EXPECT_EQ(r.err, "artel" + command + ": error: " + needle + "\n");
  }
}

// `bench comm` says what "auto" ran, size by size: on shared memory the
// one-shot all-reduce up to 64 KiB and the two-shot above (algorithms.cpp).
TEST_F(TrainCommand, BenchCommSaysWhichAlgorithmAutoRanAtEachSize) {
  const Result r = artel("bench comm -n 2 --min-bytes 32K --max-bytes 128K --iters 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("algorithm auto -> one_shot, two_shot\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" sent/rank  ran\n"), std::string::npos) << r.out;
  for (const auto& [size, ran] : std::vector<std::pair<std::string, std::string>>{
           {"32768", "one_shot"}, {"65536", "one_shot"}, {"131072", "two_shot"}}) {
    const size_t row = r.out.find("\n " + std::string(12 - size.size(), ' ') + size + " ");
    ASSERT_NE(row, std::string::npos) << size << ": " << r.out;
    const std::string line = r.out.substr(row + 1, r.out.find('\n', row + 1) - row - 1);
    EXPECT_EQ(line.substr(line.size() - ran.size() - 2), "  " + ran) << line;
  }
  const Result forced = artel("bench comm -n 2 --algorithm ring --max-bytes 64 --iters 2 --json");
  ASSERT_EQ(forced.code, 0) << forced.err;
  EXPECT_NE(forced.out.find("\"algorithm\":\"ring\""), std::string::npos) << forced.out;
  EXPECT_NE(forced.out.find("\"ran\":\"ring\"}"), std::string::npos) << forced.out;
}

// uint16 token files (nanoGPT's layout for train, llm.c's for validation)
// train the GPT over their vocabulary; damaged ones stop the run in one line.
TEST_F(TrainCommand, TokenFilesTrainAndDamagedOnesAreRefused) {
  auto write_ids = [&](const std::string& name, int n, bool header, int32_t magic = 20240520) {
    std::ofstream f(dir_ / name, std::ios::binary);
    if (header) {
      std::vector<int32_t> h(256, 0);
      h[0] = magic, h[1] = 1, h[2] = n;
      f.write(reinterpret_cast<const char*>(h.data()), 1024);
    }
    for (int i = 0; i < n; ++i) {
      const uint16_t id = static_cast<uint16_t>(i * 7 % 300);
      f.write(reinterpret_cast<const char*>(&id), 2);
    }
  };
  write_ids("train.bin", 4000, false);
  write_ids("val.bin", 600, true);
  const std::string data = " --data " + (dir_ / "train.bin").string() + " --val-data " + (dir_ / "val.bin").string();
  Result r = train(tiny_gpt("run") + data + " --vocab-size 300 --steps 3");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("token file " + (dir_ / "train.bin").string() + " (nanoGPT) + "), std::string::npos) << r.out;
  auto final = artel::nn::read_safetensors((dir_ / "run" / "final.safetensors").string());
  EXPECT_EQ(final.tensors.at("transformer.wte.weight").shape(), (artel::Shape{300, 16}));
  expect_one_line_error(tiny_gpt("bad") + data + " --vocab-size 200", "outside the vocabulary of 200");
  write_ids("magic.bin", 600, true, 7);
  expect_one_line_error(tiny_gpt("bad") + " --data " + (dir_ / "magic.bin").string(), "instead of 20240520");
  expect_one_line_error(tiny_gpt("bad") + " --vocab-size 300", "go with token files");
}

// `artel export --format hf` writes Hugging Face's GPT-2 layout; exporting
// that back, or training from it with --init, gives the same weights bit for bit.
TEST_F(TrainCommand, HuggingFaceLayoutRoundTripsBitForBit) {
  ASSERT_EQ(train(tiny_gpt("run") + " --steps 2").code, 0);
  auto artel_cmd = [&](const std::string& args) {
    return std::system(("cd " + dir_.string() + " && " + ARTEL_BINARY + " " + args + " >/dev/null 2>" +
                        (dir_ / "export.err").string()).c_str());
  };
  const fs::path final = dir_ / "run" / "final.safetensors", hf = dir_ / "model.safetensors";
  ASSERT_EQ(artel_cmd("export " + final.string() + " " + hf.string() + " --format hf"), 0) << slurp(dir_ / "export.err");
  auto h = artel::nn::read_safetensors(hf.string());
  ASSERT_TRUE(h.tensors.count("h.0.attn.c_attn.weight"));
  EXPECT_EQ(h.tensors.at("h.0.attn.c_attn.weight").shape(), (artel::Shape{16, 48}));  // Conv1D: [in, out]
  ASSERT_EQ(artel_cmd("export " + hf.string() + " " + (dir_ / "back.safetensors").string()), 0);
  auto a = artel::nn::read_safetensors(final.string()), b = artel::nn::read_safetensors((dir_ / "back.safetensors").string());
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, t] : a.tensors) EXPECT_EQ(t.to_vector(), b.tensors.at(name).to_vector()) << name;
  // --init reads the layout: the run's init.safetensors is the file's weights.
  ASSERT_EQ(train(tiny_gpt("from_hf") + " --steps 1 --init " + hf.string()).code, 0);
  auto init = artel::nn::read_safetensors((dir_ / "from_hf" / "init.safetensors").string());
  for (const auto& [name, t] : a.tensors) EXPECT_EQ(t.to_vector(), init.tensors.at(name).to_vector()) << name;
  EXPECT_NE(artel_cmd("export " + final.string() + " x.safetensors --format onnx"), 0);
  // A file that is not a whole GPT is refused, and nothing is written.
  auto st = artel::nn::read_safetensors(final.string());
  st.tensors.erase("transformer.h.0.mlp.c_fc.bias");
  artel::nn::write_safetensors((dir_ / "partial.safetensors").string(), st.tensors);
  EXPECT_NE(artel_cmd("export partial.safetensors partial_hf.safetensors --format hf"), 0);
  EXPECT_NE(slurp(dir_ / "export.err").find("lacks transformer.h.0.mlp.c_fc.bias of a GPT of 1 block, 16 wide"),
            std::string::npos) << slurp(dir_ / "export.err");
  EXPECT_FALSE(fs::exists(dir_ / "partial_hf.safetensors"));
  // A Hugging Face file of another model: a block more was dropped without a
  // word, an untied head too, and a bf16 Conv1D weight was named by its shape alone.
  auto hf_variant = [&](const std::string& name, const std::function<void(std::map<std::string, artel::Tensor>&)>& edit) {
    auto file = artel::nn::read_safetensors(hf.string());
    edit(file.tensors);
    artel::nn::write_safetensors((dir_ / name).string(), file.tensors);
    return (dir_ / name).string();
  };
  const std::string deeper = hf_variant("deeper.safetensors", [](auto& t) {
    std::map<std::string, artel::Tensor> more;
    for (const auto& [n, v] : t)
      if (n.rfind("h.0.", 0) == 0) more["h.1." + n.substr(4)] = v;
    t.insert(more.begin(), more.end());
  });
  const std::string untied = hf_variant("untied.safetensors", [](auto& t) {
    t["lm_head.weight"] = t.at("wte.weight").clone();
    t["lm_head.weight"].template data<float>()[0] += 1.0f;
  });
  const std::string bf16 = hf_variant("bf16.safetensors", [](auto& t) {
    t["h.0.attn.c_attn.weight"] = artel::Tensor::zeros(t.at("h.0.attn.c_attn.weight").shape(), artel::DType::bf16);
  });
  for (const auto& [file, said] : std::vector<std::pair<std::string, std::string>>{
           {deeper, "holds h.1.attn.c_attn.bias, h.1.attn.c_attn.weight, h.1.attn.c_proj.bias and 9 more, which the "
                    "model has not"},
           {untied, "lm_head.weight differs from wte.weight, and the GPT ties them"},
           {bf16, "h.0.attn.c_attn.weight is bfloat16 [16, 48], where a Conv1D weight is a 2-D float32 [in, out] "
                  "tensor"}}) {
    const Result r = train(tiny_gpt("from_bad_hf") + " --steps 1 --init " + file);
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find(said), std::string::npos) << r.err;
  }
}

// `artel generate RUN` draws what the end of the run printed (same weights,
// seed, temperature, first token), continues a prompt, and decodes token
// ids through llm.c's token table.
TEST_F(TrainCommand, GenerateFromARunDirectory) {
  Result r = train(tiny_gpt("run") + " --steps 3 --generate 30");
  ASSERT_EQ(r.code, 0) << r.err;
  const size_t at = r.out.find("sampled at temperature 0.8 ---\n");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string printed = r.out.substr(at + 31, r.out.find("\n---", at + 31) - (at + 31));
  auto generate = [&](const std::string& args) {
    const std::string cmd = "cd " + dir_.string() + " && " + ARTEL_BINARY + " generate " + args + " >" +
                            (dir_ / "gen.out").string() + " 2>" + (dir_ / "gen.err").string();
    const int status = std::system(cmd.c_str());
    return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir_ / "gen.out") + slurp(dir_ / "gen.err"));
  };
  auto [code, out] = generate((dir_ / "run").string() + " --tokens 30");
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(out, printed + "\n");
  // A run whose data has moved: said of the run's config, not of a --data flag generate lacks.
  fs::create_directories(dir_ / "moved");
  nlohmann::json config = nlohmann::json::parse(slurp(dir_ / "run" / "config.json"));
  config["data"] = (dir_ / "gone.txt").string();
  std::ofstream(dir_ / "moved" / "config.json") << config.dump();
  std::tie(code, out) = generate((dir_ / "moved").string() + " --tokens 5");
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("config.json names the data " + (dir_ / "gone.txt").string() + ", which does not exist"),
            std::string::npos) << out;
  std::tie(code, out) = generate((dir_ / "run").string() + " --prompt ROMEO: --tokens 5");
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(out.substr(0, 6), "ROMEO:");
  EXPECT_EQ(out.size(), 6u + 5 + 1);
  // A prompt the run cannot read: said of --prompt, in one line.
  std::tie(code, out) = generate((dir_ / "run").string() + " --prompt 'ROMEO~' --tokens 5");
  EXPECT_EQ(code, 1);
  EXPECT_EQ(out, "artel generate: error: --prompt: character byte 126 is not in the 65-character vocabulary (hint: write "
                 "it in the characters of the run's training text, or give --prompt-ids)\n");
  // A token model with a token table: ids 0..299 stand for "<id>|".
  std::ofstream train_bin(dir_ / "train.bin", std::ios::binary);
  for (int i = 0; i < 3000; ++i) {
    const uint16_t id = static_cast<uint16_t>(i * 7 % 300);
    train_bin.write(reinterpret_cast<const char*>(&id), 2);
  }
  train_bin.close();
  ASSERT_EQ(train(tiny_gpt("tokens") + " --data " + (dir_ / "train.bin").string() + " --vocab-size 300 --steps 2").code, 0);
  std::ofstream table(dir_ / "table.bin", std::ios::binary);
  std::vector<uint32_t> header(256, 0);
  header[0] = 20240328, header[1] = 1, header[2] = 300;
  table.write(reinterpret_cast<const char*>(header.data()), 1024);
  for (int id = 0; id < 300; ++id) {
    const std::string s = std::to_string(id) + "|";
    table.put(static_cast<char>(s.size())).write(s.data(), static_cast<std::streamsize>(s.size()));
  }
  table.close();
  std::tie(code, out) = generate((dir_ / "tokens").string() + " --prompt-ids \"7 14\" --tokens 4");
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), ' '), 5) << out;  // six ids
  std::tie(code, out) = generate((dir_ / "tokens").string() + " --prompt-ids \"7 14\" --tokens 4 --tokenizer " +
                                 (dir_ / "table.bin").string());
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(out.substr(0, 5), "7|14|") << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '|'), 6) << out;
  // A table of fewer tokens than the model draws from: refused before sampling.
  std::ofstream small(dir_ / "small.bin", std::ios::binary);
  header[2] = 10;
  small.write(reinterpret_cast<const char*>(header.data()), 1024);
  for (int id = 0; id < 10; ++id) small.put(1).put(static_cast<char>('a' + id));
  small.close();
  std::tie(code, out) = generate((dir_ / "tokens").string() + " --tokens 4 --tokenizer " + (dir_ / "small.bin").string());
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("holds 10 tokens, fewer than the model's vocabulary of 300"), std::string::npos) << out;
  std::tie(code, out) = generate((dir_ / "tokens").string() + " --prompt hello");
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("use --prompt-ids"), std::string::npos) << out;
  std::tie(code, out) = generate((dir_ / "tokens").string() + " --prompt-ids 7,300");  // commas separate too
  EXPECT_EQ(code, 1);
  EXPECT_EQ(out.rfind("artel generate: error: --prompt-ids: 300 is not below the model's vocabulary of 300", 0), 0u) << out;
  std::tie(code, out) = generate((dir_ / "tokens").string() + " --prompt-ids \"   \"");
  EXPECT_EQ(code, 1);
  EXPECT_EQ(out.rfind("artel generate: error: --prompt-ids holds no token id (hint: e.g. --prompt-ids", 0), 0u) << out;
}

// A word model names its blocks h.0.attn.c_attn… as GPT2Model does, beside
// its own embed.weight: its weights are still its own, for generate, --init
// and export (they were taken for Hugging Face's GPT-2 and refused).
TEST_F(TrainCommand, AWordModelsWeightsAreNotTakenForHuggingFaces) {
  Result r = train("--model wordlm --n-embd 16 --n-head 2 --block-size 8 --steps 2 --eval-batches 1 --threads 1 "
                   "--generate 8 --out " + (dir_ / "run").string());
  ASSERT_EQ(r.code, 0) << r.err;
  const size_t at = r.out.find("sampled at temperature 0.8 ---\n");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string printed = r.out.substr(at + 31, r.out.find("\n---", at + 31) - (at + 31));
  Result g = artel("generate " + (dir_ / "run").string() + " --tokens 8");
  EXPECT_EQ(g.code, 0) << g.err;
  EXPECT_EQ(g.out, printed + "\n");
  g = artel("generate " + (dir_ / "run").string() + " --prompt 'the zzqxj' --tokens 8");
  EXPECT_EQ(g.code, 1);
  EXPECT_EQ(g.err, "artel generate: error: --prompt: word 'zzqxj' is not in the 14565-word vocabulary (hint: write it "
                   "in the words of the run's training text, or give --prompt-ids)\n");
  const fs::path final = dir_ / "run" / "final.safetensors";
  ASSERT_TRUE(artel::nn::read_safetensors(final.string()).tensors.count("h.0.attn.c_attn.weight"));
  r = train("--model wordlm --n-embd 16 --n-head 2 --block-size 8 --steps 1 --eval-batches 1 --threads 1 "
            "--generate 0 --init " + final.string() + " --out " + (dir_ / "again").string());
  ASSERT_EQ(r.code, 0) << r.err;
  auto a = artel::nn::read_safetensors(final.string());
  auto b = artel::nn::read_safetensors((dir_ / "again" / "init.safetensors").string());
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, t] : a.tensors) EXPECT_EQ(t.to_vector(), b.tensors.at(name).to_vector()) << name;
  r = artel("export " + final.string() + " " + (dir_ / "copy.safetensors").string());
  EXPECT_EQ(r.code, 0) << r.err;
  r = artel("export " + final.string() + " " + (dir_ / "hf.safetensors").string() + " --format hf");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("holds no GPT"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "hf.safetensors"));
}

TEST_F(TrainCommand, BadInitWeightsAreNamed) {
  std::string out = " --out " + (dir_ / "bad").string();
  std::ofstream(dir_ / "corrupt.safetensors") << "this is not a safetensors file at all";
  expect_one_line_error(tiny_gpt("bad") + " --init " + (dir_ / "corrupt.safetensors").string(), "corrupt.safetensors");
  expect_one_line_error(tiny_gpt("bad") + " --init " + (dir_ / "absent.safetensors").string(), "absent.safetensors");
  // Weights of a wider model: every mismatch is named.
  ASSERT_EQ(train(tiny_gpt("wide") + " --n-embd 32 --steps 1").code, 0);
  expect_one_line_error(tiny_gpt("bad") + " --init " + (dir_ / "wide" / "final.safetensors").string(),
                        "transformer.wte.weight");
  // Weights of another model: the missing names are named.
  ASSERT_EQ(train("--model mlp --steps 1 --batch-size 8 --eval-batches 1 --out " + (dir_ / "mlp").string()).code, 0);
  expect_one_line_error(tiny_gpt("bad") + " --init " + (dir_ / "mlp" / "final.safetensors").string(), "transformer.");
}

TEST_F(TrainCommand, NonFiniteLossStopsNamingTheStep) {
  Result r = train("--model mlp --lr 1e30 --steps 20 --batch-size 32 --threads 1 --out run");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("at step "), std::string::npos) << r.err;
  EXPECT_TRUE(r.err.find("NaN") != std::string::npos || r.err.find("infinite") != std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  // Every step before the bad one is recorded; the bad one is named in the message.
  auto lines = metrics(dir_ / "run");
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(r.err.find("at step " + std::to_string(lines.back()["step"].get<int>() + 1) + ";"), std::string::npos)
      << r.err;
}

TEST_F(TrainCommand, HelpListsTheKeys) {
  Result r = train("--help");
  EXPECT_EQ(r.code, 0);
  for (const char* flag : {"--model", "--batch-size", "--data-order", "--init", "--grad-clip", "--n-layer", "--config"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
}

}  // namespace
