// check_compatible (declared in checkpoint.h): a checkpoint holds this run's model.
#include <algorithm>
#include <string>
#include <vector>

#include "artel/train/checkpoint.h"

namespace artel::train {
namespace {

using nlohmann::json;

std::string show(const json& j) { return j.is_null() ? "none" : j.dump(); }

// "n_layer 4 in the checkpoint, 6 in this run" for each top-level key that differs.
void diff_config(const json& have, const json& want, std::vector<std::string>& out) {
  if (!have.is_object() || !want.is_object()) {
    out.push_back("model config " + show(have) + " in the checkpoint, " + show(want) + " in this run");
    return;
  }
  for (const auto& [k, v] : want.items()) {
    json h = have.contains(k) ? have[k] : json();
    if (h != v) out.push_back("model config " + k + " " + show(h) + " in the checkpoint, " + show(v) + " in this run");
  }
  for (const auto& [k, v] : have.items())
    if (!want.contains(k)) out.push_back("model config " + k + " " + show(v) + " in the checkpoint, none in this run");
}

// "parameter 'w' is [4, 8] in the checkpoint, [4, 16] in this run", and
// those only one side has, the first few by name.
// `what` is "parameter" or "buffer"; `recorded` says whether the checkpoint
// says anything of them (older ones do not).
void diff_parameters(const std::string& what, const json& have, bool recorded, const json& want,
                     std::vector<std::string>& out) {
  if (!have.is_object() || !recorded) return;
  auto said = [](const json& j) { return j.is_string() ? j.get<std::string>() : j.dump(); };
  std::vector<std::string> found;
  for (const auto& [name, shape] : want.items()) {
    if (!have.contains(name)) found.push_back(what + " '" + name + "' " + said(shape) + " is not in the checkpoint");
    else if (have[name] != shape)
      found.push_back(what + " '" + name + "' is " + said(have[name]) + " in the checkpoint, " + said(shape) +
                      " in this run");
  }
  for (const auto& [name, shape] : have.items())
    if (!want.contains(name))
      found.push_back("the checkpoint's " + what + " '" + name + "' " + said(shape) + " is not in this run's model");
  constexpr size_t kShown = 3;
  for (size_t i = 0; i < found.size() && i < kShown; ++i) out.push_back(found[i]);
  if (found.size() > kShown) out.push_back(std::to_string(found.size() - kShown) + " more parameters differ");
}

// Another optimizer's state was read as far as it went (the weights already
// in place) before the missing buffer was found.
void diff_optimizer(const json& have, const json& want, std::vector<std::string>& out) {
  if (!have.is_object() || have.empty() || want.empty()) return;  // not recorded
  auto said = [](const json& o) {  // 'adamw' (state: exp_avg exp_avg_sq); appended (GCC 12's -Wrestrict)
    std::string s = "'";
    s += o.value("name", std::string("?"));
    s += "' (state:";
    const json state = o.value("state", json::array());
    for (const json& k : state) s.append(" ").append(k.is_string() ? k.get<std::string>() : k.dump());
    s += state.empty() ? " none)" : ")";
    return s;
  };
  const json& state = have.value("state", json::array());
  bool holds_all = state.is_array();
  for (const json& k : want.value("state", json::array()))
    holds_all &= state.is_array() && std::find(state.begin(), state.end(), k) != state.end();
  if (have.value("name", json()) != want.value("name", json()) || !holds_all)
    out.push_back("optimizer " + said(have) + " in the checkpoint, " + said(want) + " in this run");
}

}  // namespace

void check_compatible(const json& meta, const Compatibility& expect, const std::string& path) {
  if (!meta.is_object() || !meta.contains("model_kind") || !meta["model_kind"].is_string())
    throw Error("checkpoint " + path + " does not say which model it holds (no model_kind in its metadata)",
                "it was not written by `artel train`; start a fresh run or point it at another checkpoint directory");
  std::vector<std::string> diffs;
  std::string kind = meta["model_kind"].get<std::string>();
  if (kind != expect.model_kind) {
    diffs.push_back("model '" + kind + "' in the checkpoint, '" + expect.model_kind + "' in this run");
  } else {
    diff_config(meta.value("model_config", json()), expect.model_config, diffs);
    const json have = meta.value("parameters", json());
    diff_parameters("parameter", have, have.is_object() && !have.empty() && !expect.parameters.empty(),
                    expect.parameters, diffs);
    diff_parameters("buffer", meta.value("buffers", json()), meta.contains("buffers") && !expect.parameters.empty(),
                    expect.buffers, diffs);
    diff_optimizer(meta.value("optimizer", json()), expect.optimizer, diffs);
  }
  if (diffs.empty()) return;
  std::string msg = "checkpoint " + path + " was written by another model or optimizer: ";
  for (size_t i = 0; i < diffs.size(); ++i) msg += (i ? "; " : "") + diffs[i];
  throw Error(msg, "resume with the same model, config and optimizer (any layout and number of workers), or use "
                   "another output directory (to start from its weights: artel checkpoint export, then --init)");
}

}  // namespace artel::train
