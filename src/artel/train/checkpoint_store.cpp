// CheckpointStore and the compatibility check (declared in checkpoint.h).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "artel/train/checkpoint.h"

namespace artel::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kPrefix = "ckpt-";
constexpr const char* kSuffix = ".artel";
constexpr const char* kTmpMark = ".artel.tmp-";

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "ckpt-00000100.artel" -> 100; -1 for any other name.
int64_t step_of(const std::string& name) {
  size_t p = std::strlen(kPrefix), s = std::strlen(kSuffix);
  if (name.size() < p + 8 + s || name.compare(0, p, kPrefix) != 0 || name.compare(name.size() - s, s, kSuffix) != 0)
    return -1;
  std::string digits = name.substr(p, name.size() - p - s);
  if (!all_digits(digits) || digits.size() > 18) return -1;
  return std::stoll(digits);
}

// "ckpt-00000100.artel.tmp-4242" -> 4242; -1 for any other name.
long tmp_pid_of(const std::string& name) {
  size_t at = name.find(kTmpMark);
  if (name.compare(0, std::strlen(kPrefix), kPrefix) != 0 || at == std::string::npos) return -1;
  std::string pid = name.substr(at + std::strlen(kTmpMark));
  if (!all_digits(pid) || pid.size() > 9) return -1;
  return std::stol(pid);
}

// The error's message without its hint (which suits a user reading it, not a log line).
std::string problem_of(const Error& e) {
  std::string what = e.what(), tail = " (hint: " + e.hint() + ")";
  if (!e.hint().empty() && what.size() >= tail.size() && what.compare(what.size() - tail.size(), tail.size(), tail) == 0)
    what.resize(what.size() - tail.size());
  return what;
}

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
  json ws = meta.value("world_size", json());
  if (ws != json(expect.world_size))
    diffs.push_back("world size " + show(ws) + " in the checkpoint, " + std::to_string(expect.world_size) +
                    " in this run");
  json layout = meta.value("layout", json());
  if (layout != expect.layout)
    diffs.push_back("parallel layout " + show(layout) + " in the checkpoint, " + show(expect.layout) + " in this run");
  if (diffs.empty()) return;
  std::string msg = "checkpoint " + path + " belongs to a different run: ";
  for (size_t i = 0; i < diffs.size(); ++i) msg += (i ? "; " : "") + diffs[i];
  throw Error(msg, "resume with the same model, config and number of workers, or use another output directory");
}

CheckpointStore::CheckpointStore(std::string dir, int64_t keep_last) : dir_(std::move(dir)), keep_last_(keep_last) {
  ARTEL_CHECK(!dir_.empty(), "checkpoint directory is empty");
  ARTEL_CHECK(keep_last_ >= 0, "checkpoints to keep must be >= 0 (0 keeps all), got ", keep_last_);
}

std::string CheckpointStore::path_for(int64_t step) const {
  ARTEL_CHECK(step >= 0, "checkpoint step must be >= 0, got ", step);
  char name[40];
  std::snprintf(name, sizeof name, "%s%08lld%s", kPrefix, static_cast<long long>(step), kSuffix);
  return (fs::path(dir_) / name).string();
}

std::vector<std::string> CheckpointStore::list() const {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    int64_t step = step_of(it->path().filename().string());
    if (step >= 0) found.emplace_back(step, it->path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [step, path] : found) out.push_back(std::move(path));
  return out;
}

std::string CheckpointStore::save(const Checkpoint& ck) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw Error("cannot create checkpoint directory " + dir_ + ": " + ec.message(), "check the --out path");
  std::string path = path_for(ck.step);
  write_checkpoint(path, ck);
  prune(path);
  remove_stale_tmp();
  return path;
}

void CheckpointStore::prune(const std::string& keep) const {
  if (keep_last_ == 0) return;
  std::vector<std::string> all = list();
  int64_t excess = static_cast<int64_t>(all.size()) - keep_last_;
  for (size_t i = 0; i < all.size() && excess > 0; ++i) {
    if (all[i] == keep) continue;
    if (::unlink(all[i].c_str()) != 0 && errno != ENOENT)
      throw Error("cannot delete old checkpoint " + all[i] + ": " + std::strerror(errno),
                  "check the permissions of " + dir_);
    --excess;
  }
}

// A temporary file is a write in progress or one cut short by a crash; it is
// removed only when the process named in it no longer exists.
void CheckpointStore::remove_stale_tmp() const {
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    long pid = tmp_pid_of(it->path().filename().string());
    if (pid <= 0) continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) ::unlink(it->path().c_str());
  }
}

std::optional<Checkpoint> CheckpointStore::load_latest(const Compatibility& expect,
                                                       const std::function<void(const std::string&)>& warn) const {
  std::vector<std::string> all = list();
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    Checkpoint ck;
    try {
      ck = read_checkpoint(*it);
    } catch (const Error& e) {
      std::string next = std::next(it) == all.rend() ? "none left" : "trying " + *std::next(it);
      if (warn) warn("skipping " + problem_of(e) + "; " + next);
      continue;
    }
    check_compatible(ck.meta, expect, *it);
    return ck;
  }
  return std::nullopt;
}

}  // namespace artel::train
