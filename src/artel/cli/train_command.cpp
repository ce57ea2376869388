// `artel train`: parses the command line into a TrainConfig (flags override a
// --config JSON file, which overrides the model's recipe defaults) and runs
// the trainer. argv, the environment and the terminal are read here, at the
// edge, and nowhere deeper (STYLE 14). With no arguments at all, `artel` runs
// this command with its defaults: the main job.
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "artel/cli/command.h"
#include "artel/core/error.h"
#include "artel/train/bundled_data.h"
#include "artel/train/train_config.h"
#include "artel/train/trainer.h"

namespace artel::cli {

namespace {

std::string flag_of(const std::string& key) {
  std::string f = "--" + key;
  for (char& c : f)
    if (c == '_') c = '-';
  return f;
}

// " [default gpt 12, mlp/cnn 128]": the defaults of a key for each model.
// "" for keys whose help already says it (model, data).
std::string defaults_of(const std::string& key) {
  if (key == "model" || key == "data") return "";
  std::vector<std::pair<std::string, std::string>> by_value;  // value -> models
  for (const char* m : {"gpt", "mlp", "cnn"}) {
    nlohmann::json v = train::default_config(m).to_json()[key];
    std::string text = v.is_string() ? (v.get<std::string>().empty() ? "none" : v.get<std::string>()) : v.dump();
    auto it = std::find_if(by_value.begin(), by_value.end(), [&](const auto& p) { return p.first == text; });
    if (it == by_value.end()) by_value.emplace_back(text, m);
    else it->second += std::string("/") + m;
  }
  if (by_value.size() == 1) return " [default " + by_value[0].first + "]";
  std::string s;
  for (const auto& [value, models] : by_value) s += (s.empty() ? " [default " : ", ") + models + " " + value;
  return s + "]";
}

// Every config key becomes a flag taking one value; only flags actually given
// override the config file, so the file's values are never silently replaced
// by CLI11 defaults.
int run_train(int argc, char** argv) {
  CLI::App app{"Train gpt (W2 recipe), mlp (W1) or cnn on one worker; metrics, weights and progress go to --out.",
               "artel train"};
  std::string config_path;
  app.add_option("--config", config_path, "JSON file with any of the keys below (flags override it)");
  std::map<std::string, std::string> values;
  std::vector<std::pair<std::string, CLI::Option*>> options;
  for (const auto& k : train::config_keys())
    options.emplace_back(k.key, app.add_option(flag_of(k.key), values[k.key], k.help + defaults_of(k.key))
                                    ->type_name(k.type)
                                    ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast));  // a later flag wins
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    throw Error(e.what(), "see `artel train --help`");
  }

  train::ConfigSources src;
  if (!config_path.empty()) src.json = train::read_config_file(config_path);
  for (const auto& [key, opt] : options)
    if (opt->count() > 0) src.overrides[key] = values[key];
  train::TrainConfig cfg = train::resolve_config(src);
  if (cfg.data.empty()) cfg.data = train::default_data_for(cfg.model);

  train::RunOptions run;
  run.terminal = isatty(STDOUT_FILENO) == 1;
  train::Trainer trainer(cfg, run);
  trainer.run();
  return 0;
}

const bool kRegistered = register_command("train", "train a model (no arguments: the main job)", run_train);

}  // namespace

}  // namespace artel::cli
