// check_compatible (declared in checkpoint.h): a checkpoint holds this run's model.
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
  }
  if (diffs.empty()) return;
  std::string msg = "checkpoint " + path + " holds a different model: ";
  for (size_t i = 0; i < diffs.size(); ++i) msg += (i ? "; " : "") + diffs[i];
  throw Error(msg, "resume with the same model and config (any layout and number of workers), or use another output directory");
}

}  // namespace artel::train
