#include "artel/train/checkpoint_reader.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "artel/train/checkpoint_format.h"
#include "artel/train/checkpoint_store.h"

namespace artel::train {

namespace {

namespace fs = std::filesystem;

// Elements [from, from + n) of flat `src` into elements [to, to + n) of flat `dst` (same dtype).
void copy_elements(const Tensor& src, int64_t from, Tensor& dst, int64_t to, int64_t n) {
  const size_t e = dtype_size(dst.dtype());
  std::memcpy(static_cast<char*>(dst.raw()) + to * e, static_cast<const char*>(src.raw()) + from * e, n * e);
}

bool same_region(const ManifestPart& p, const HeldPart& want) {
  return p.parts == want.parts && p.part == want.part && (p.parts == 1 || p.split == want.region_split());
}

Manifest read_manifest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) checkpoint_corrupt(path, "no manifest (the checkpoint was not completely written)");
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) checkpoint_corrupt(path, "the manifest is not JSON");
  return manifest_from_json(j, path);
}

}  // namespace

std::string problem_of(const Error& e) {
  std::string what = e.what(), tail = " (hint: " + e.hint() + ")";
  if (!e.hint().empty() && what.size() >= tail.size() && what.compare(what.size() - tail.size(), tail.size(), tail) == 0)
    what.resize(what.size() - tail.size());
  return what;
}

ShardedCheckpoint::ShardedCheckpoint(std::string dir) : dir_(std::move(dir)) {
  manifest_ = read_manifest((fs::path(dir_) / kManifestName).string());
  for (const ManifestShard& s : manifest_.shards) {
    const std::string path = (fs::path(dir_) / s.file).string();
    if (!fs::exists(path)) checkpoint_corrupt(path, "missing (the manifest names it)");
    files_.push_back(std::make_unique<CheckpointFile>(path));
    const CheckpointHeader& h = files_.back()->header();
    if (h.file_bytes != s.bytes || h.header_crc != s.header_crc)
      checkpoint_corrupt(path, "not the shard the manifest names (" + std::to_string(h.file_bytes) + " bytes, " +
                                   std::to_string(s.bytes) + " expected, or another header CRC)");
  }
  for (const ManifestTensor& t : manifest_.tensors)
    for (const ManifestPart& p : t.parts) {
      const CheckpointTensorInfo* info = file(p.file).find(p.name);
      if (!info || info->dtype != t.dtype || shape_numel(info->shape) != p.range.size())
        checkpoint_corrupt(file(p.file).path(), "does not hold the part of '" + t.key + "' the manifest names");
    }
}

ShardedCheckpoint::~ShardedCheckpoint() = default;

const CheckpointFile& ShardedCheckpoint::file(const std::string& name) const {
  for (size_t i = 0; i < manifest_.shards.size(); ++i)
    if (manifest_.shards[i].file == name) return *files_[i];
  checkpoint_corrupt((fs::path(dir_) / kManifestName).string(), "names no shard '" + name + "'");
}

bool ShardedCheckpoint::read(HeldPart& want) const {
  const ManifestTensor* t = manifest_.find(want.key);
  if (!t) return false;
  if ((t->dtype != want.dtype || t->shape != want.whole) && want.absent_if_different) return false;
  if (t->dtype != want.dtype || t->shape != want.whole)
    throw Error("checkpoint " + dir_ + ": '" + want.key + "' is " + dtype_name(t->dtype) + " " + shape_str(t->shape) +
                    ", this run expects " + dtype_name(want.dtype) + " " + shape_str(want.whole),
                "the checkpoint belongs to a different model configuration");
  const int64_t held = shape_numel(want.part_shape());
  ARTEL_CHECK(0 <= want.range.begin && want.range.begin <= want.range.end && want.range.end <= held,
              "checkpoint read of ", want.key, ": elements [", want.range.begin, ", ", want.range.end,
              ") are not within its part of ", held);
  ARTEL_CHECK(want.data.numel() == want.range.size() && want.data.dtype() == want.dtype, "checkpoint read of ",
              want.key, ": the destination holds ", want.data.numel(), " elements for a region of ", want.range.size());
  // The parts of this very region, when they cover the wanted range: copy the overlaps.
  int64_t covered = 0;
  for (const ManifestPart& p : t->parts)
    if (same_region(p, want))
      covered += std::max<int64_t>(0, std::min(p.range.end, want.range.end) - std::max(p.range.begin, want.range.begin));
  if (covered == want.range.size()) {
    for (const ManifestPart& p : t->parts) {
      const int64_t b = std::max(p.range.begin, want.range.begin), e = std::min(p.range.end, want.range.end);
      if (!same_region(p, want) || b >= e) continue;
      copy_elements(file(p.file).read(p.name), b - p.range.begin, want.data, b - want.range.begin, e - b);
    }
    return true;
  }
  // Another layout's parts: the whole tensor, then this region of it.
  const Tensor whole = assemble(*t);
  const Tensor part = nn::take_part(whole, want.region_split(), want.part, want.parts);
  copy_elements(part.view({part.numel()}), want.range.begin, want.data, 0, want.range.size());
  return true;
}

// The whole tensor from its parts: each tensor-parallel part put together
// from its ranges, then the parts joined (manifest_from_json checked that
// they tile it).
Tensor ShardedCheckpoint::assemble(const ManifestTensor& t) const {
  const ManifestPart& first = t.parts.front();
  const nn::Split split = first.parts == 1 ? nn::Split{} : first.split;
  std::vector<Tensor> parts;
  for (int q = 0; q < first.parts; ++q)
    parts.push_back(Tensor::empty(nn::part_geometry(t.shape, split, q, first.parts).shape, t.dtype));
  for (const ManifestPart& p : t.parts) {
    Tensor flat = parts[static_cast<size_t>(p.part)].view({parts[static_cast<size_t>(p.part)].numel()});
    copy_elements(file(p.file).read(p.name), 0, flat, p.range.begin, p.range.size());
  }
  if (first.parts == 1) return parts[0];
  return nn::join_parts(parts, split, t.shape);
}

Tensor ShardedCheckpoint::read_whole(const std::string& key) const {
  const ManifestTensor* t = manifest_.find(key);
  if (!t) checkpoint_corrupt(dir_, "holds no tensor '" + key + "'");
  return assemble(*t);
}

std::vector<std::string> checkpoints_newest_first(const std::string& dir) {
  std::vector<std::string> all = CheckpointStore(dir, 0).list();
  std::reverse(all.begin(), all.end());
  return all;
}

std::string skipping_line(const std::string& problem, const std::string& next) {
  const std::string said = problem.rfind("checkpoint ", 0) == 0 ? problem : "(" + problem + ")";
  return "skipping " + said + "; " + (next.empty() ? "none left" : "trying " + next);
}

std::unique_ptr<ShardedCheckpoint> open_newest_checkpoint(const std::string& path,
                                                          const std::function<void(const std::string&)>& warn) {
  if (!fs::is_directory(path))
    throw Error("checkpoint " + path + ": no such directory",
                "pass a checkpoint directory (OUT/checkpoints/ckpt-<step>) or OUT/checkpoints");
  const std::string name = fs::path(path).lexically_normal().filename().string();
  if (fs::exists(fs::path(path) / kManifestName) || name.rfind("ckpt-", 0) == 0)
    return std::make_unique<ShardedCheckpoint>(path);  // that one, or its error
  const fs::path run_checkpoints = fs::path(path) / "checkpoints";
  const std::vector<std::string> all =
      checkpoints_newest_first(fs::is_directory(run_checkpoints) ? run_checkpoints.string() : path);
  for (size_t i = 0; i < all.size(); ++i) {
    try {
      return std::make_unique<ShardedCheckpoint>(all[i]);
    } catch (const Error& e) {
      if (warn) warn(skipping_line(problem_of(e), i + 1 < all.size() ? all[i + 1] : ""));
    }
  }
  return nullptr;
}

std::unique_ptr<ShardedCheckpoint> newest_checkpoint(const std::string& path,
                                                     const std::function<void(const std::string&)>& warn) {
  if (std::unique_ptr<ShardedCheckpoint> ck = open_newest_checkpoint(path, warn)) return ck;
  const fs::path final = fs::path(path) / "final.safetensors";
  throw Error("no complete checkpoint in " + path,
              fs::exists(final) ? "the run's last weights are " + final.string() + "; checkpoints are written by "
                                  "`artel train --checkpoint-every N`"
                                : "checkpoints are written by `artel train --checkpoint-every N`");
}

}  // namespace artel::train
