#include "artel/train/setting_scope.h"

#include <algorithm>

#include "artel/core/error.h"
#include "artel/models/model.h"

namespace artel::train {

namespace {

// Settings read only in some runs: each of `keys` takes effect when
// `applies` holds, which is when `needs` (a flag and its value) is set;
// `decided_by` is the key whose value this run has instead.
struct SettingScope {
  std::vector<const char*> keys;
  const char* needs;
  const char* decided_by;
  bool (*applies)(const TrainConfig&);
};

bool text_model(const TrainConfig& c) { return models::trains_on_text(c.model); }

const std::vector<SettingScope>& setting_scopes() {
  static const std::vector<SettingScope> s = {
      // temperature: also what `artel generate RUN` samples at by default, so any text run's.
      {{"n_layer", "n_head", "n_embd", "block_size", "dropout", "gelu", "vocab_multiple", "generate", "temperature"},
       "--model gpt or wordlm", "model", text_model},
      // Selective recomputation reruns the attention core, which only the text models have.
      {{"recompute"}, "--model gpt or wordlm (selective; full recomputes any model)", "model",
       [](const TrainConfig& c) { return c.recompute != "selective" || text_model(c); }},
      {{"momentum", "nesterov"}, "--optimizer sgd", "optimizer", [](const TrainConfig& c) { return c.optimizer == "sgd"; }},
      {{"beta1", "beta2", "eps"}, "--optimizer adamw", "optimizer",
       [](const TrainConfig& c) { return c.optimizer == "adamw"; }},
      {{"min_lr"}, "--lr-schedule cosine", "lr_schedule", [](const TrainConfig& c) { return c.lr_schedule == "cosine"; }},
      {{"keep_checkpoints"}, "--checkpoint-every above 0", "checkpoint_every",
       [](const TrainConfig& c) { return c.checkpoint_every > 0; }},
      {{"powersgd_rank", "powersgd_start_step"}, "--grad-compression powersgd", "grad_compression",
       [](const TrainConfig& c) { return c.grad_compression == "powersgd"; }},
      // ZeRO 3 gathers and reduce-scatters unit by unit (parallel/fully_sharded.h), and a
      // parameter server's workers push to it: neither has gradient buckets or all-reduces.
      {{"bucket_mb", "first_bucket_mb", "grad_all_reduce"}, "--zero 0, 1 or 2", "zero",
       [](const TrainConfig& c) { return c.zero < 3; }},
      {{"bucket_mb", "first_bucket_mb", "grad_all_reduce"}, "--ps-servers 0 (data parallelism)", "ps_servers",
       [](const TrainConfig& c) { return c.ps_servers == 0; }},
      {{"reshard_after_forward"}, "--zero 3", "zero", [](const TrainConfig& c) { return c.zero == 3; }},
      {{"ps_sparse"}, "--ps-servers above 0", "ps_servers", [](const TrainConfig& c) { return c.ps_servers > 0; }},
      {{"schedule"}, "--pp above 1", "pp", [](const TrainConfig& c) { return c.pp > 1; }},
      {{"chunks"}, "--schedule interleaved", "schedule", [](const TrainConfig& c) { return c.schedule == "interleaved"; }},
  };
  return s;
}

bool listed(const std::vector<std::string>& keys, const std::string& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// A JSON value as it reads on a command line: 0.9, sgd, true.
std::string as_flag_value(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

}  // namespace

void refuse_settings_without_effect(const TrainConfig& cfg, const TrainConfig& defaults,
                                    const std::vector<std::string>& given, const std::map<std::string, std::string>& flags) {
  const nlohmann::json values = cfg.to_json(), default_values = defaults.to_json();
  for (const SettingScope& s : setting_scopes()) {
    if (s.applies(cfg)) continue;
    for (const std::string key : s.keys) {
      if (!listed(given, key) || values[key] == default_values[key]) continue;
      const auto flag = flags.find(key);
      const std::string setting = flag != flags.end() ? flag_of(key) + " " + flag->second
                                                      : "config key '" + key + "': " + values[key].dump();
      throw Error(setting + " would do nothing: it goes with " + s.needs + ", and this run has " +
                      flag_of(s.decided_by) + " " + as_flag_value(values[s.decided_by]),
                  "drop " + (flag != flags.end() ? flag_of(key) : "'" + key + "' from the config file") +
                      ", or change " + flag_of(s.decided_by));
    }
  }
}

}  // namespace artel::train
