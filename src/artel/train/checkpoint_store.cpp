#include "artel/train/checkpoint_store.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "artel/train/checkpoint.h"
#include "artel/train/checkpoint_format.h"

namespace artel::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kPrefix = "ckpt-";
constexpr const char* kTmpMark = ".tmp-";

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "ckpt-00000100" -> 100; -1 for any other name.
int64_t step_of(const std::string& name) {
  const size_t p = std::strlen(kPrefix);
  if (name.size() < p + 8 || name.compare(0, p, kPrefix) != 0) return -1;
  const std::string digits = name.substr(p);
  if (!all_digits(digits) || digits.size() > 18) return -1;
  return std::stoll(digits);
}

// "rank-00001.artel.tmp-4242", "manifest.json.tmp-4242" -> 4242; -1 for any other name.
long tmp_pid_of(const std::string& name) {
  const size_t at = name.rfind(kTmpMark);
  if (at == std::string::npos) return -1;
  const std::string pid = name.substr(at + std::strlen(kTmpMark));
  if (!all_digits(pid) || pid.size() > 9) return -1;
  return std::stol(pid);
}

bool process_gone(long pid) { return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

// A part as a manifest entry naming `file`.
ManifestTensor entry_of(const HeldPart& p, const std::string& file) {
  return ManifestTensor{p.key, p.dtype, p.whole,
                        {ManifestPart{file, p.key, p.region_split(), p.part, p.parts, p.range}}};
}

// One shard's parts and dropout state, from its header, each part checked
// against its table (the named tensor is there, with as many elements as
// its region has).
void collect_shard(const std::string& dir, const std::string& file, Manifest& m, std::map<std::string, size_t>& index,
                   std::map<int, RngState>& dropout) {
  const std::string path = (fs::path(dir) / file).string();
  const CheckpointHeader h = read_checkpoint_header(path);
  m.shards.push_back({file, h.file_bytes, h.header_crc});
  if (!h.meta.contains("tensors") || !h.meta["tensors"].is_array())
    checkpoint_corrupt(path, "no \"tensors\" in its metadata (not a shard)");
  for (const json& j : h.meta["tensors"]) {
    ManifestTensor t = tensor_from_json(j, path);
    for (const ManifestPart& p : t.parts) {
      auto info = std::find_if(h.tensors.begin(), h.tensors.end(), [&](const auto& i) { return i.name == p.name; });
      if (p.file != file || info == h.tensors.end() || info->dtype != t.dtype ||
          shape_numel(info->shape) != p.range.size())
        checkpoint_corrupt(path, "its table does not hold the part of '" + t.key + "' its metadata lists");
    }
    auto [it, fresh] = index.emplace(t.key, m.tensors.size());
    if (fresh) {
      m.tensors.push_back(std::move(t));
      continue;
    }
    ManifestTensor& have = m.tensors[it->second];
    if (have.dtype != t.dtype || have.shape != t.shape)
      checkpoint_corrupt(path, "'" + t.key + "' is " + dtype_name(t.dtype) + " " + shape_str(t.shape) + " here, " +
                                   dtype_name(have.dtype) + " " + shape_str(have.shape) + " in another shard");
    have.parts.insert(have.parts.end(), t.parts.begin(), t.parts.end());
  }
  if (h.meta.contains("dropout_stage")) {
    const int stage = h.meta["dropout_stage"].get<int>();
    if (h.rng.size() != 1 || !dropout.emplace(stage, h.rng[0]).second)
      checkpoint_corrupt(path, "a second or malformed dropout state of stage " + std::to_string(stage));
  }
}

}  // namespace

CheckpointStore::CheckpointStore(std::string dir, int64_t keep_last) : dir_(std::move(dir)), keep_last_(keep_last) {
  ARTEL_CHECK(!dir_.empty(), "checkpoint directory is empty");
  ARTEL_CHECK(keep_last_ >= 0, "checkpoints to keep must be >= 0 (0 keeps all), got ", keep_last_);
  std::error_code ec;
  if (fs::exists(dir_, ec) && !fs::is_directory(dir_, ec))
    throw Error("checkpoint directory " + dir_ + " is a file", "move the file away, or train into another --out");
}

void refuse_earlier_checkpoints(const std::string& dir) {
  const std::vector<std::string> all = CheckpointStore(dir, 0).list();
  if (all.empty()) return;
  throw Error(dir + " holds an earlier run's checkpoints (newest " + fs::path(all.back()).filename().string() +
                  "), which a fresh run would mix with its own and a restart would resume from",
              "pass --resume to continue that run, or train into another --out (or remove " + dir + ")");
}

std::string CheckpointStore::path_for(int64_t step) const {
  ARTEL_CHECK(step >= 0, "checkpoint step must be >= 0, got ", step);
  char name[40];
  std::snprintf(name, sizeof name, "%s%08lld", kPrefix, static_cast<long long>(step));
  return (fs::path(dir_) / name).string();
}

std::string CheckpointStore::shard_name(int rank) {
  char name[40];
  std::snprintf(name, sizeof name, "rank-%05d.artel", rank);
  return name;
}

std::vector<std::string> CheckpointStore::list() const {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const int64_t step = step_of(it->path().filename().string());
    std::error_code dir_ec;  // a symlink loop: not a directory (is_directory() threw a filesystem_error)
    if (step >= 0 && it->is_directory(dir_ec)) found.emplace_back(step, it->path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [step, path] : found) out.push_back(std::move(path));
  return out;
}

void CheckpointStore::begin(int64_t step) const {
  // Whatever holds this checkpoint's names is an earlier attempt's, judged
  // torn at resume: a file where the directory goes, or a directory where
  // the manifest goes, failed the write only after the step was trained,
  // and a link there had it written into another checkpoint.
  const std::string ckpt = path_for(step), manifest = (fs::path(ckpt) / kManifestName).string();
  std::error_code none, ec;  // a status of nothing there sets `none`: not a failure
  const fs::file_status at = fs::symlink_status(ckpt, none);
  if (fs::exists(at) && !fs::is_directory(at)) fs::remove(ckpt, ec);  // a file, or a link (never its target)
  else if (fs::is_directory(fs::symlink_status(manifest, none))) fs::remove_all(manifest, ec);
  if (ec) throw Error("cannot remove " + ckpt + "'s stale entry: " + ec.message(), "move it away from " + dir_);
  if (::unlink(manifest.c_str()) != 0 && errno != ENOENT && errno != ENOTDIR)
    throw Error("cannot remove " + manifest + ": " + std::strerror(errno), "check the permissions of " + dir_);
}

std::string CheckpointStore::write_shard(int64_t step, int rank, const std::vector<HeldPart>& parts,
                                         const std::optional<StageDropout>& dropout) const {
  ARTEL_CHECK(rank >= 0, "checkpoint shard of rank ", rank, ": ranks are >= 0");
  const std::string ckpt = path_for(step), file = shard_name(rank);
  std::error_code ec;
  fs::create_directories(ckpt, ec);
  if (ec) throw Error("cannot create checkpoint directory " + ckpt + ": " + ec.message(), "check the --out path");
  Checkpoint shard;
  shard.step = step;
  json tensors = json::array();
  for (const HeldPart& p : parts) {
    ARTEL_CHECK(p.data.numel() == p.range.size(), "checkpoint part ", p.key, " holds ", p.data.numel(),
                " elements, its region ", p.range.size());
    tensors.push_back(tensor_to_json(entry_of(p, file)));
    shard.add(p.key, p.data);
  }
  shard.meta = {{"rank", rank}, {"tensors", tensors}};
  if (dropout) {
    shard.meta["dropout_stage"] = dropout->stage;
    shard.rng = {dropout->state};
  }
  const std::string path = (fs::path(ckpt) / file).string();
  if (fs::is_directory(fs::symlink_status(path, ec))) fs::remove_all(path, ec);  // not a shard: an earlier attempt's debris
  ec.clear();  // nothing there, or a removal that failed: the write below says why
  write_checkpoint(path, shard);
  return path;
}

std::string CheckpointStore::commit(Manifest run, int world) const {
  ARTEL_CHECK(world >= 1, "checkpoint commit of step ", run.step, " over ", world, " shards: a checkpoint has >= 1");
  const std::string ckpt = path_for(run.step), path = (fs::path(ckpt) / kManifestName).string();
  std::map<std::string, size_t> index;
  std::map<int, RngState> dropout;
  run.shards.clear();
  run.tensors.clear();
  for (int r = 0; r < world; ++r) {
    // Every worker has written its shard (they passed a barrier): one not here
    // was written under another directory, another host's own disk.
    if (!fs::exists(fs::path(ckpt) / shard_name(r)))
      throw Error("checkpoint " + ckpt + ": rank " + std::to_string(r) + "'s shard " + shard_name(r) +
                      " is not there, though rank " + std::to_string(r) + " wrote it",
                  "every rank must write its checkpoints where rank 0 reads them: the same --out, on a "
                  "filesystem every host shares");
    collect_shard(ckpt, shard_name(r), run, index, dropout);
  }
  for (const ManifestTensor& t : run.tensors) check_tiling(t, path);  // every element written exactly once
  run.dropout.clear();
  for (int s = 0; s < static_cast<int>(dropout.size()); ++s) {
    auto it = dropout.find(s);
    ARTEL_CHECK(it != dropout.end(), "checkpoint ", ckpt, ": no worker wrote the dropout state of stage ", s);
    run.dropout.push_back(it->second);
  }
  remove_other_shards(ckpt, world);
  const std::string bytes = manifest_to_json(run).dump(1) + "\n";
  write_atomically(path, [&](int fd, const std::string& tmp) { write_all(fd, bytes.data(), bytes.size(), tmp); });
  prune(ckpt);
  for (const std::string& c : list()) remove_stale_tmp(c);
  return ckpt;
}

// The oldest checkpoints beyond keep_last go, whole directories (never the
// one just written); a directory without a manifest is a write that did not
// finish and counts as one of them, and goes first, whatever its step (a
// newer torn one had outlived complete ones), unless a live process is
// still writing it.
void CheckpointStore::prune(const std::string& keep) const {
  if (keep_last_ == 0) return;
  std::vector<std::string> all = list();
  std::error_code ec;
  std::stable_partition(all.begin(), all.end(), [&](const std::string& c) {
    return !fs::exists(fs::path(c) / kManifestName, ec) && !being_written(c);
  });
  int64_t excess = static_cast<int64_t>(all.size()) - keep_last_;
  for (size_t i = 0; i < all.size() && excess > 0; ++i) {
    if (all[i] == keep) continue;
    std::error_code ec;
    fs::remove_all(all[i], ec);
    if (ec) throw Error("cannot delete old checkpoint " + all[i] + ": " + ec.message(), "check the permissions of " + dir_);
    --excess;
  }
}

// Shards of an earlier attempt at this step with more workers: no manifest names them.
void CheckpointStore::remove_other_shards(const std::string& ckpt, int world) const {
  std::error_code ec;
  for (fs::directory_iterator it(ckpt, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    bool ours = false;
    for (int r = 0; r < world && !ours; ++r) ours = name == shard_name(r);
    if (!ours && name.rfind("rank-", 0) == 0 && name.size() > 6 && name.compare(name.size() - 6, 6, ".artel") == 0)
      ::unlink(it->path().c_str());
  }
}

// A checkpoint directory holding a live process's temporary file: a write in progress.
bool CheckpointStore::being_written(const std::string& ckpt) const {
  std::error_code ec;
  for (fs::directory_iterator it(ckpt, ec), end; !ec && it != end; it.increment(ec)) {
    const long pid = tmp_pid_of(it->path().filename().string());
    if (pid > 0 && !process_gone(pid)) return true;
  }
  return false;
}

// A temporary file is a write in progress or one cut short by a crash; it is
// removed only when the process named in it no longer exists.
void CheckpointStore::remove_stale_tmp(const std::string& ckpt) const {
  std::error_code ec;
  for (fs::directory_iterator it(ckpt, ec), end; !ec && it != end; it.increment(ec)) {
    const long pid = tmp_pid_of(it->path().filename().string());
    if (pid > 0 && process_gone(pid)) ::unlink(it->path().c_str());
  }
}

}  // namespace artel::train
