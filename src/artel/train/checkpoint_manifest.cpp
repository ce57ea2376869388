#include "artel/train/checkpoint_manifest.h"

#include <algorithm>
#include <map>
#include <set>

#include "artel/train/checkpoint_format.h"

namespace artel::train {

namespace {

using nlohmann::json;

json split_to_json(const nn::Split& s) {
  return {{"dim", s.dim}, {"groups", s.groups}, {"pad", s.pad}, {"unit", s.unit}};
}

// Field `key` of object `j` as an integer in [lo, hi], else a corrupt-file error naming `where`.
int64_t get_int(const std::string& path, const json& j, const char* key, const std::string& where, int64_t lo,
                int64_t hi) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number_integer())
    checkpoint_corrupt(path, where + ": field \"" + key + "\" is missing or not an integer");
  const int64_t v = j[key].get<int64_t>();
  if (v < lo || v > hi) checkpoint_corrupt(path, where + ": field \"" + key + "\" is out of range");
  return v;
}

std::string get_string(const std::string& path, const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string() || j[key].get<std::string>().empty())
    checkpoint_corrupt(path, where + ": field \"" + key + "\" is missing or not a string");
  return j[key].get<std::string>();
}

constexpr int64_t kMax = int64_t{1} << 62;

nn::Split parse_split(const std::string& path, const json& j, const std::string& where) {
  if (!j.is_object() || !j.contains("pad") || !j["pad"].is_boolean())
    checkpoint_corrupt(path, where + ": split is not {dim, groups, pad, unit}");
  return nn::Split{.dim = static_cast<int>(get_int(path, j, "dim", where, -1, 64)),
                   .groups = get_int(path, j, "groups", where, 1, kMax),
                   .pad = j["pad"].get<bool>(),
                   .unit = get_int(path, j, "unit", where, 1, kMax)};
}

ManifestPart parse_part(const std::string& path, const json& j, const ManifestTensor& t) {
  const std::string where = "tensor '" + t.key + "'";
  ManifestPart p;
  p.file = get_string(path, j, "file", where);
  p.name = get_string(path, j, "name", where);
  if (!j.contains("split")) checkpoint_corrupt(path, where + ": a part has no split");
  p.split = parse_split(path, j["split"], where);
  p.parts = static_cast<int>(get_int(path, j, "parts", where, 1, 1 << 20));
  p.part = static_cast<int>(get_int(path, j, "part", where, 0, p.parts - 1));
  p.range.begin = get_int(path, j, "begin", where, 0, kMax);
  p.range.end = get_int(path, j, "end", where, p.range.begin, kMax);
  return p;
}

// The model record's parts a resume compares (check_compatible) have their
// types: a resume never meets a record it cannot read. Older checkpoints lack
// some of them, which is not corruption.
void check_model_record(const std::string& path, const json& model) {
  for (const char* key : {"model_config", "parameters", "buffers", "optimizer"})
    if (model.contains(key) && !model[key].is_object())
      checkpoint_corrupt(path, std::string("model: field \"") + key + "\" is not an object");
  if (model.contains("model_kind") && !model["model_kind"].is_string())
    checkpoint_corrupt(path, "model: field \"model_kind\" is not a string");
  if (!model.contains("optimizer")) return;
  const json& opt = model["optimizer"];
  if (opt.contains("name") && !opt["name"].is_string())
    checkpoint_corrupt(path, "model: the optimizer's \"name\" is not a string");
  if (opt.contains("state") && (!opt["state"].is_array() ||
                                std::any_of(opt["state"].begin(), opt["state"].end(), [](const json& k) { return !k.is_string(); })))
    checkpoint_corrupt(path, "model: the optimizer's \"state\" is not an array of names");
}

}  // namespace

ManifestTensor tensor_from_json(const json& j, const std::string& path) {
  ManifestTensor t;
  t.key = get_string(path, j, "key", "a tensor");
  const std::string where = "tensor '" + t.key + "'";
  if (!parse_dtype(get_string(path, j, "dtype", where), t.dtype)) checkpoint_corrupt(path, where + ": unsupported dtype");
  if (!j.contains("shape") || !j["shape"].is_array()) checkpoint_corrupt(path, where + ": no shape array");
  for (const json& d : j["shape"]) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(kMax))
      checkpoint_corrupt(path, where + ": a dimension is not a non-negative integer");
    t.shape.push_back(d.get<int64_t>());
  }
  if (!j.contains("parts") || !j["parts"].is_array()) checkpoint_corrupt(path, where + ": no parts array");
  for (const json& p : j["parts"]) t.parts.push_back(parse_part(path, p, t));
  return t;
}

json tensor_to_json(const ManifestTensor& t) {
  json parts = json::array();
  for (const ManifestPart& p : t.parts)
    parts.push_back({{"file", p.file}, {"name", p.name}, {"split", split_to_json(p.split)}, {"part", p.part},
                     {"parts", p.parts}, {"begin", p.range.begin}, {"end", p.range.end}});
  return {{"key", t.key}, {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"parts", parts}};
}

const ManifestTensor* Manifest::find(const std::string& key) const {
  for (const ManifestTensor& t : tensors)
    if (t.key == key) return &t;
  return nullptr;
}

json manifest_to_json(const Manifest& m) {
  json dropout = json::array(), shards = json::array(), tensors = json::array();
  for (const RngState& s : m.dropout) dropout.push_back(rng_to_json(s));
  for (const ManifestShard& s : m.shards)
    shards.push_back({{"file", s.file}, {"bytes", s.bytes}, {"header_crc", s.header_crc}});
  for (const ManifestTensor& t : m.tensors) tensors.push_back(tensor_to_json(t));
  return {{"format", kManifestFormat}, {"version", kManifestVersion}, {"step", m.step},
          {"consumed_samples", m.consumed_samples}, {"global_batch", m.global_batch}, {"model", m.model},
          {"layout", m.layout}, {"dropout", dropout}, {"shards", shards}, {"tensors", tensors}};
}

Manifest manifest_from_json(const json& j, const std::string& path) {
  if (!j.is_object() || j.value("format", json()) != json(kManifestFormat))
    checkpoint_corrupt(path, "not an artel checkpoint manifest (no \"format\": \"artel-checkpoint\")");
  const int64_t version = get_int(path, j, "version", "manifest", 0, 1 << 30);
  if (version != kManifestVersion)
    throw Error("checkpoint " + path + ": unsupported manifest version " + std::to_string(version) +
                    " (this build reads version " + std::to_string(kManifestVersion) + ")",
                "resume with the artel version that wrote it");
  Manifest m;
  m.step = get_int(path, j, "step", "manifest", 0, kMax);
  m.consumed_samples = get_int(path, j, "consumed_samples", "manifest", 0, kMax);
  m.global_batch = get_int(path, j, "global_batch", "manifest", 1, kMax);
  for (const char* key : {"model", "layout"})
    if (!j.contains(key) || !j[key].is_object()) checkpoint_corrupt(path, std::string("field \"") + key + "\" is not an object");
  check_model_record(path, j["model"]);
  for (const auto& [key, value] : j["layout"].items())
    if (!value.is_number_integer()) checkpoint_corrupt(path, "layout: field \"" + key + "\" is not an integer");
  // The layout is read for the resume's messages and checks (whose batches
  // follow: the seed, the data's size): a number no run writes is damage.
  for (const char* key : {"world", "dp", "pp", "tp", "batch_size", "accum", "micro_batches"})
    if (j["layout"].contains(key)) get_int(path, j["layout"], key, "layout", 1, kMax);
  for (const auto& [key, hi] : {std::pair<const char*, int64_t>{"zero", 3}, {"seed", kMax}, {"train_items", kMax}})
    if (j["layout"].contains(key)) get_int(path, j["layout"], key, "layout", 0, hi);
  m.model = j["model"];
  m.layout = j["layout"];
  for (const char* key : {"dropout", "shards", "tensors"})
    if (!j.contains(key) || !j[key].is_array()) checkpoint_corrupt(path, std::string("field \"") + key + "\" is not an array");
  for (size_t i = 0; i < j["dropout"].size(); ++i) m.dropout.push_back(parse_rng(path, j["dropout"][i], i));
  std::set<std::string> files, keys;
  for (const json& s : j["shards"]) {
    ManifestShard shard{get_string(path, s, "file", "a shard"),
                        static_cast<uint64_t>(get_int(path, s, "bytes", "a shard", 0, kMax)),
                        static_cast<uint32_t>(get_int(path, s, "header_crc", "a shard", 0, 0xffffffffLL))};
    if (shard.file.find('/') != std::string::npos || !files.insert(shard.file).second)
      checkpoint_corrupt(path, "shard '" + shard.file + "' is not a plain file name, or listed twice");
    m.shards.push_back(std::move(shard));
  }
  for (const json& t : j["tensors"]) {
    m.tensors.push_back(tensor_from_json(t, path));
    const ManifestTensor& back = m.tensors.back();
    if (!keys.insert(back.key).second) checkpoint_corrupt(path, "tensor '" + back.key + "' is listed twice");
    for (const ManifestPart& p : back.parts)
      if (!files.count(p.file))
        checkpoint_corrupt(path, "tensor '" + back.key + "' has a part in '" + p.file + "', which is not a shard");
    check_tiling(back, path);
  }
  return m;
}

void check_tiling(const ManifestTensor& t, const std::string& path) {
  const std::string where = "tensor '" + t.key + "'";
  if (t.parts.empty()) checkpoint_corrupt(path, where + " has no parts");
  const ManifestPart& first = t.parts.front();
  const nn::Split split = first.parts == 1 ? nn::Split{} : first.split;
  std::map<int, std::vector<optim::ElementRange>> by_part;
  for (const ManifestPart& p : t.parts) {
    if (p.parts != first.parts || (p.parts > 1 && !(p.split == split)))
      checkpoint_corrupt(path, where + ": its parts are split in different ways");
    by_part[p.part].push_back(p.range);
  }
  int64_t numel = 0;
  try {
    numel = shape_numel(nn::part_geometry(t.shape, split, 0, first.parts).shape);
  } catch (const Error& e) {
    checkpoint_corrupt(path, where + ": its split does not fit its shape " + shape_str(t.shape));
  }
  for (int q = 0; q < first.parts; ++q) {
    std::vector<optim::ElementRange>& ranges = by_part[q];
    std::sort(ranges.begin(), ranges.end(), [](auto a, auto b) { return a.begin < b.begin; });
    int64_t at = 0;
    for (const optim::ElementRange& r : ranges) {
      if (r.begin != at) checkpoint_corrupt(path, where + ": part " + std::to_string(q) + " has a gap or an overlap at element " + std::to_string(std::min(at, r.begin)));
      at = r.end;
    }
    if (at != numel)
      checkpoint_corrupt(path, where + ": part " + std::to_string(q) + " covers " + std::to_string(at) + " of " +
                                   std::to_string(numel) + " elements");
  }
}

std::string describe_layout(const json& layout) {
  auto num = [&](const char* k) { return layout.value(k, int64_t{1}); };
  std::string s = std::to_string(num("world")) + (num("world") == 1 ? " worker" : " workers");
  if (num("pp") == 1 && num("tp") == 1) return s + " (dp " + std::to_string(num("dp")) + ")";
  return s + " (dp " + std::to_string(num("dp")) + " x pp " + std::to_string(num("pp")) + " x tp " +
         std::to_string(num("tp")) + ")";
}

}  // namespace artel::train
