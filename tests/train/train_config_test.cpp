#include "artel/train/train_config.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "artel/core/error.h"
#include "artel/core/memory_limit.h"
#include "artel/train/recipe.h"

namespace artel::train {
namespace {

std::string error_of(const ConfigSources& src) {
  try {
    resolve_config(src);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TrainConfig, GptDefaultsAreTheW2Recipe) {
  TrainConfig c = resolve_config({});
  EXPECT_EQ(c.model, "gpt");
  EXPECT_EQ(c.optimizer, "adamw");
  EXPECT_DOUBLE_EQ(c.lr, 1e-3);
  EXPECT_DOUBLE_EQ(c.beta1, 0.9);
  EXPECT_DOUBLE_EQ(c.beta2, 0.99);
  EXPECT_DOUBLE_EQ(c.weight_decay, 0.1);
  EXPECT_EQ(c.lr_schedule, "constant");
  EXPECT_DOUBLE_EQ(c.grad_clip, 0.0);
  EXPECT_DOUBLE_EQ(c.dropout, 0.0);
  EXPECT_EQ(c.batch_size, 12);
  EXPECT_EQ(c.block_size, 64);
  EXPECT_EQ(c.n_layer, 4);
  EXPECT_EQ(c.n_head, 4);
  EXPECT_EQ(c.n_embd, 128);
}

TEST(TrainConfig, PresetsAreNanoGptsGpt2RecipesAndFlagsOverrideThem) {
  TrainConfig c = resolve_config({.overrides = {{"preset", "gpt2"}, {"steps", "5000"}}});
  EXPECT_EQ(c.n_layer, 12);
  EXPECT_EQ(c.n_head, 12);
  EXPECT_EQ(c.n_embd, 768);
  EXPECT_EQ(c.block_size, 1024);
  EXPECT_EQ(c.vocab_multiple, 64);
  EXPECT_EQ(model_vocab(c, 50257), 50304);
  EXPECT_DOUBLE_EQ(c.beta2, 0.95);
  EXPECT_DOUBLE_EQ(c.weight_decay, 0.1);
  EXPECT_DOUBLE_EQ(c.grad_clip, 1.0);
  EXPECT_EQ(c.lr_schedule, "cosine");
  EXPECT_EQ(c.warmup_steps, 2000);
  EXPECT_DOUBLE_EQ(c.lr, 6e-4);
  EXPECT_DOUBLE_EQ(c.min_lr, 6e-5);
  EXPECT_EQ(c.steps, 5000);  // the flag wins
  TrainConfig m = resolve_config({.json = {{"preset", "gpt2-medium"}}, .overrides = {{"n_layer", "2"}}});
  EXPECT_EQ(m.n_embd, 1024);
  EXPECT_EQ(m.n_head, 16);
  EXPECT_EQ(m.n_layer, 2);
  EXPECT_DOUBLE_EQ(m.lr, 3e-4);
  EXPECT_EQ(model_vocab(resolve_config({}), 65), 65);  // no preset: no padding
  EXPECT_NE(error_of({.overrides = {{"preset", "gpt3"}}}).find("unknown preset 'gpt3'"), std::string::npos);
  EXPECT_NE(error_of({.overrides = {{"preset", "gpt2"}, {"model", "mlp"}}}).find("is a GPT, but the model is mlp"),
            std::string::npos);
}

TEST(TrainConfig, MlpDefaultsAreTheW1Recipe) {
  TrainConfig c = resolve_config({.overrides = {{"model", "mlp"}}});
  EXPECT_EQ(c.optimizer, "sgd");
  EXPECT_DOUBLE_EQ(c.lr, 0.05);
  EXPECT_DOUBLE_EQ(c.momentum, 0.9);
  EXPECT_DOUBLE_EQ(c.weight_decay, 0.0);
  EXPECT_EQ(c.batch_size, 128);
  EXPECT_EQ(c.steps, 620);
  EXPECT_EQ(c.out, "runs/mlp");
}

TEST(TrainConfig, BucketSizesArePyTorchsUnlessGiven) {
  parallel::BucketOptions b = resolve_config({}).bucket_options();
  EXPECT_EQ(b.first_bucket_bytes, 1 << 20);
  EXPECT_EQ(b.bucket_bytes, 25 << 20);
  b = resolve_config({.overrides = {{"bucket_mb", "0.5"}, {"first_bucket_mb", "0.000001"}}}).bucket_options();
  EXPECT_EQ(b.bucket_bytes, 1 << 19);
  EXPECT_EQ(b.first_bucket_bytes, 4);  // at least one float
}

TEST(TrainConfig, FlagsOverrideJsonWhichOverridesDefaults) {
  ConfigSources src;
  src.json = nlohmann::json::parse(R"({"model": "mlp", "lr": 0.1, "batch_size": 64, "data-order": "sequential"})");
  src.overrides = {{"lr", "0.2"}, {"steps", "7"}, {"nesterov", "true"}};
  TrainConfig c = resolve_config(src);
  EXPECT_EQ(c.model, "mlp");
  EXPECT_DOUBLE_EQ(c.lr, 0.2);
  EXPECT_EQ(c.batch_size, 64);
  EXPECT_EQ(c.steps, 7);
  EXPECT_EQ(c.data_order, "sequential");
  EXPECT_TRUE(c.nesterov);
  EXPECT_DOUBLE_EQ(c.momentum, 0.9);  // mlp default kept
}

TEST(TrainConfig, ModelFromFlagsPicksTheDefaultsEvenWhenJsonSaysOtherwise) {
  ConfigSources src;
  src.json = nlohmann::json::parse(R"({"model": "gpt"})");
  src.overrides = {{"model", "cnn"}};
  TrainConfig c = resolve_config(src);
  EXPECT_EQ(c.model, "cnn");
  EXPECT_EQ(c.optimizer, "sgd");
  EXPECT_DOUBLE_EQ(c.lr, 0.02);
}

TEST(TrainConfig, UnknownKeysAreNamed) {
  ConfigSources json_src;
  json_src.json = nlohmann::json::parse(R"({"learning_rate": 0.1})");
  EXPECT_NE(error_of(json_src).find("unknown config key 'learning_rate' in the config file"), std::string::npos);
  ConfigSources flag_src;
  flag_src.overrides = {{"bogus", "1"}};
  EXPECT_NE(error_of(flag_src).find("'bogus'"), std::string::npos);
}

TEST(TrainConfig, BadValuesAreOneLineErrorsNamingTheKey) {
  auto err = [](std::map<std::string, std::string> o) { return error_of({.overrides = std::move(o)}); };
  EXPECT_NE(err({{"model", "rnn"}}).find("unknown model 'rnn'"), std::string::npos);
  EXPECT_NE(err({{"batch_size", "0"}}).find("batch_size must be >= 1, got 0"), std::string::npos);
  EXPECT_NE(err({{"steps", "-3"}}).find("steps must be >= 1"), std::string::npos);
  EXPECT_NE(err({{"n_embd", "-1"}}).find("n_embd must be in [1, 1048576], got -1"), std::string::npos);
  EXPECT_NE(err({{"data_order", "random"}}).find("unknown data_order 'random'"), std::string::npos);
  EXPECT_NE(err({{"gemm", "mkl"}}).find("unknown gemm 'mkl'"), std::string::npos);
  EXPECT_NE(err({{"lr", "fast"}}).find("--lr takes a number, got 'fast'"), std::string::npos);
  EXPECT_NE(err({{"steps", "1.5"}}).find("--steps takes an integer"), std::string::npos);
  EXPECT_NE(err({{"n_head", "3"}}).find("multiple of n_head"), std::string::npos);
  EXPECT_NE(err({{"dropout", "1"}}).find("dropout must be in [0, 1)"), std::string::npos);
  EXPECT_NE(err({{"bucket_mb", "0"}}).find("bucket_mb must be in (0, 4096], got 0"), std::string::npos);
  EXPECT_NE(err({{"first_bucket_mb", "-1"}}).find("first_bucket_mb must be in (0, 4096], got -1"), std::string::npos);
  EXPECT_NE(err({{"steps", "5"}, {"epochs", "2"}}).find("give one of them"), std::string::npos);
  for (const auto& o : std::vector<std::map<std::string, std::string>>{{{"batch_size", "0"}}, {{"model", "x"}}})
    EXPECT_EQ(err(o).find('\n'), std::string::npos);
}

// A setting the run never reads (momentum for AdamW, a GPT's shape for the
// MLP) was dropped without a word; it is refused, unless its value is the
// default and so would change nothing either way.
TEST(TrainConfig, SettingsThisRunDoesNotReadAreRefusedUnlessTheyChangeNothing) {
  auto err = [](std::map<std::string, std::string> o) { return error_of({.overrides = std::move(o)}); };
  EXPECT_NE(err({{"model", "mlp"}, {"n_layer", "2"}})
                .find("--n-layer 2 would do nothing: it goes with --model gpt or wordlm, and this run has --model mlp "
                      "(hint: drop --n-layer, or change --model)"),
            std::string::npos);
  EXPECT_NE(err({{"momentum", "0.9"}}).find("--momentum 0.9 would do nothing: it goes with --optimizer sgd, and this "
                                            "run has --optimizer adamw"),
            std::string::npos);
  EXPECT_NE(err({{"model", "mlp"}, {"beta2", "0.95"}}).find("--beta2 0.95 would do nothing"), std::string::npos);
  EXPECT_NE(err({{"min_lr", "1e-5"}}).find("it goes with --lr-schedule cosine"), std::string::npos);
  EXPECT_NE(err({{"schedule", "gpipe"}}).find("it goes with --pp above 1, and this run has --pp 1"), std::string::npos);
  EXPECT_NE(err({{"zero", "3"}, {"bucket_mb", "5"}}).find("it goes with --zero 0, 1 or 2, and this run has --zero 3"),
            std::string::npos);
  EXPECT_NE(err({{"ps_servers", "1"}, {"grad_all_reduce", "ring"}}).find("and this run has --ps-servers 1"),
            std::string::npos);
  EXPECT_NE(err({{"reshard_after_forward", "false"}}).find("it goes with --zero 3"), std::string::npos);
  EXPECT_NE(err({{"model", "cnn"}, {"recompute", "selective"}}).find("--recompute selective would do nothing: it goes "
                                                                     "with --model gpt or wordlm"),
            std::string::npos);
  EXPECT_EQ(resolve_config({.overrides = {{"model", "cnn"}, {"recompute", "full"}}}).recompute, "full");
  EXPECT_EQ(resolve_config({.overrides = {{"model", "wordlm"}, {"recompute", "selective"}}}).recompute, "selective");
  EXPECT_NE(err({{"powersgd_rank", "8"}}).find("it goes with --grad-compression powersgd"), std::string::npos);
  EXPECT_NE(err({{"keep_checkpoints", "1"}}).find("it goes with --checkpoint-every above 0"), std::string::npos);
  EXPECT_NE(err({{"model", "mlp"}, {"temperature", "1.2"}}).find("--temperature 1.2 would do nothing: it goes with "
                                                                  "--model gpt or wordlm"),
            std::string::npos);
  // A text run's temperature is also what `artel generate RUN` samples at: taken without --generate.
  EXPECT_EQ(resolve_config({.overrides = {{"generate", "0"}, {"temperature", "1.2"}}}).temperature, 1.2);
  ConfigSources file;
  file.json = {{"model", "cnn"}, {"dropout", 0.1}};
  EXPECT_NE(error_of(file).find("config key 'dropout': 0.1 would do nothing: it goes with --model gpt or wordlm, and "
                                "this run has --model cnn (hint: drop 'dropout' from the config file, or change --model)"),
            std::string::npos)
      << error_of(file);
  // A run's own config.json, read to act on that run (artel generate): what it holds was taken when it ran.
  ConfigSources recorded{.json = {{"momentum", 0.9}}, .recorded = true};
  EXPECT_EQ(resolve_config(recorded).momentum, 0.9);
  recorded.overrides = {{"beta1", "0.8"}, {"optimizer", "sgd"}};  // flags given now are still checked
  EXPECT_NE(error_of(recorded).find("--beta1 0.8 would do nothing"), std::string::npos) << error_of(recorded);
  // Where they take effect, or change nothing, they are taken.
  EXPECT_EQ(resolve_config({.overrides = {{"optimizer", "sgd"}, {"momentum", "0.9"}, {"nesterov", "true"}}}).momentum, 0.9);
  EXPECT_EQ(resolve_config({.overrides = {{"model", "wordlm"}, {"n_layer", "2"}}}).n_layer, 2);
  EXPECT_EQ(resolve_config({.overrides = {{"zero", "3"}, {"reshard_after_forward", "false"}}}).reshard_after_forward,
            false);
  EXPECT_EQ(resolve_config({.overrides = {{"model", "mlp"}, {"generate", "0"}, {"momentum", "0.9"}}}).generate, 0);
  EXPECT_EQ(resolve_config({.overrides = {{"momentum", "0"}, {"schedule", "1f1b"}}}).momentum, 0.0);
}

TEST(TrainConfig, JsonTypesAreChecked) {
  ConfigSources src;
  src.json = nlohmann::json::parse(R"({"steps": "ten"})");
  EXPECT_NE(error_of(src).find("config key 'steps' must be an integer"), std::string::npos);
  src.json = nlohmann::json::parse(R"({"steps": 2.5})");
  EXPECT_NE(error_of(src).find("must be an integer"), std::string::npos);
  src.json = nlohmann::json::parse(R"({"steps": 9999999999999999999})");  // past int64: was -8.4e18
  EXPECT_NE(error_of(src).find("config key 'steps' must be an integer of at most 9223372036854775807, got "
                               "9999999999999999999"),
            std::string::npos)
      << error_of(src);
  src.json = nlohmann::json::parse(R"({"lr": 1})");  // an integer is a fine number
  EXPECT_DOUBLE_EQ(resolve_config(src).lr, 1.0);
}

// A run's config.json (every key) resolves to the same run: settings the
// run does not read hold their defaults there, so none is refused.
TEST(TrainConfig, ToJsonRoundTrips) {
  for (const std::map<std::string, std::string>& flags : std::vector<std::map<std::string, std::string>>{
           {{"model", "cnn"}, {"lr", "0.03"}, {"seed", "9"}},
           {{"model", "mlp"}, {"optimizer", "adamw"}, {"zero", "3"}},
           {{"model", "wordlm"}, {"ps_servers", "1"}, {"staleness", "2"}},
           {{"preset", "gpt2"}, {"pp", "2"}, {"micro_batches", "2"}, {"checkpoint_every", "5"}}}) {
    TrainConfig c = resolve_config({.overrides = flags});
    ConfigSources again;
    again.json = c.to_json();
    TrainConfig d = resolve_config(again);
    EXPECT_EQ(d.to_json(), c.to_json());
    EXPECT_EQ(config_keys().size(), c.to_json().size());
  }
}

TEST(TrainConfig, ReadsConfigFilesAndReportsBadOnes) {
  std::string path = ::testing::TempDir() + "artel_train_config_test_" + std::to_string(::getpid()) + ".json";
  std::ofstream(path) << R"({"model": "mlp", "steps": 3})";
  EXPECT_EQ(read_config_file(path)["steps"], 3);
  std::ofstream(path) << "{not json";
  EXPECT_THROW(read_config_file(path), Error);
  std::ofstream(path) << "[1, 2]";
  EXPECT_THROW(read_config_file(path), Error);
  std::remove(path.c_str());
  EXPECT_THROW(read_config_file(path), Error);
}

// The out-of-memory hint leaves out what the run already does, or cannot do.
TEST(TrainConfig, TheMemoryHintOffersOnlyWhatTheRunDoesNot) {
  TrainConfig c = default_config("gpt");
  EXPECT_EQ(memory_hint_for(c), kOutOfMemoryHint);
  c.zero = 3;
  EXPECT_EQ(memory_hint_for(c).find("--zero 3"), std::string::npos);
  EXPECT_NE(memory_hint_for(c).find("--recompute full (activations)"), std::string::npos);
  c.recompute = "full";
  EXPECT_EQ(memory_hint_for(c), "hold less per worker: a smaller --batch-size, or more workers; or raise "
                                "--memory-per-worker");
  c = default_config("gpt");
  c.tp = 2;  // ZeRO 3 runs over data parallelism alone
  EXPECT_EQ(memory_hint_for(c).find("--zero 3"), std::string::npos);
}

}  // namespace
}  // namespace artel::train
