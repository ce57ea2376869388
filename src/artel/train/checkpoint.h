// Checkpoints: everything a run needs to continue bit-for-bit — model weights,
// optimizer state, step, sampler position, RNG states — in one self-describing
// file (after llm.c's headers), and a store that keeps the last K of
// them in a directory and finds the newest good one on restart.
//
//   CheckpointStore store(cfg.out + "/checkpoints", /*keep_last=*/3);
//   Checkpoint ck;
//   ck.step = step;                       // optimizer steps done
//   ck.sampler_position = step;           // the next step index the sampler serves
//   ck.meta = compat.to_meta();           // model kind + config, world size
//   ck.add("model/" + name, param);       // aliases the live tensor: no copy
//   ck.rng = {rng.state()};
//   store.save(ck);                        // DIR/ckpt-00000100.artel, atomically
//   ...
//   auto last = store.load_latest(compat, [](const std::string& w) { log(w); });
//   if (last) last->restore("model/" + name, param);
//
// File layout (little-endian; see Note [Checkpoint file format] in checkpoint_format.cpp):
//   "ARTELCKP" | u32 version | u64 N | N bytes JSON header | pad to 64
//   | tensor data, each at a 64-byte aligned offset | u32 CRC32 of all bytes
//   before the pad | u32 0 | "ARTELEND"
// The JSON header holds meta, step, sampler position, RNG states and the tensor
// table (name, dtype, shape, offset, nbytes, crc32). Reading checks all of it;
// every problem is an artel::Error of one line naming the file (and tensor).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "artel/core/rng.h"
#include "artel/core/tensor.h"

namespace artel::train {

inline constexpr uint32_t kCheckpointFormatVersion = 1;

struct Checkpoint {
  int64_t step = 0;              // optimizer steps completed
  int64_t sampler_position = 0;  // the next step index the (random-access) sampler serves
  nlohmann::json meta = nlohmann::json::object();  // identifies the run (Compatibility::to_meta + extras)
  // "model/<param name>", "optim/<name>" (momentum, Adam m/v, step counts as i64
  // tensors...). Order is kept; names are unique. Dtypes f32, f64, i32, i64, bf16.
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::vector<RngState> rng;     // one per stream the run draws from (per rank if needed)
  std::string path;              // the file it was read from; empty when built in memory

  void add(std::string name, Tensor t) { tensors.emplace_back(std::move(name), std::move(t)); }
  bool has(const std::string& name) const;
  // The tensor called `name`; a missing one is an Error naming the file and the tensor.
  const Tensor& get(const std::string& name) const;
  // Copies tensor `name` into `dst` (same dtype and shape, else an Error naming both).
  void restore(const std::string& name, Tensor& dst) const;
};

// Writes atomically: "<path>.tmp-<pid>", fsync, rename onto `path`, fsync the
// directory. `path` either keeps its old contents or has the new ones, whole.
void write_checkpoint(const std::string& path, const Checkpoint& ck);

// Reads and validates everything (magic, version, sizes, header CRC, table,
// every tensor's CRC).
Checkpoint read_checkpoint(const std::string& path);

// The header alone, validated against the file's size and header CRC, without
// reading tensor data (to inspect a checkpoint, or test its layout).
struct CheckpointTensorInfo {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  uint64_t offset = 0;  // absolute file offset, a multiple of 64
  uint64_t nbytes = 0;
  uint32_t crc32 = 0;
};
struct CheckpointHeader {
  uint32_t version = 0;
  int64_t step = 0;
  int64_t sampler_position = 0;
  nlohmann::json meta;
  std::vector<RngState> rng;
  std::vector<CheckpointTensorInfo> tensors;
};
CheckpointHeader read_checkpoint_header(const std::string& path);

// What a run expects of a checkpoint it resumes from. A checkpoint of another
// model or world size is refused: resuming it would be a user error, never a
// reason to fall back to an older file.
struct Compatibility {
  std::string model_kind;                   // "gpt", "mlp", "cnn"
  nlohmann::json model_config = nlohmann::json::object();  // what shapes the parameters
  int64_t world_size = 1;
  nlohmann::json layout = nullptr;          // parallel layout (dp/pp/tp); null = plain data parallel

  // {"model_kind", "model_config", "world_size", "layout"}: put it in Checkpoint::meta.
  nlohmann::json to_meta() const;
};

// Throws an Error naming the file and each differing field (kind, config keys,
// world size, layout) with a hint, unless `meta` matches `expect`.
void check_compatible(const nlohmann::json& meta, const Compatibility& expect, const std::string& path);

// A directory of checkpoints "ckpt-<step, 8+ digits>.artel", the newest K kept.
class CheckpointStore {
 public:
  // keep_last >= 1, or 0 to keep every checkpoint. The directory is created on save.
  CheckpointStore(std::string dir, int64_t keep_last);

  // Writes DIR/ckpt-<step>.artel atomically, then deletes the oldest beyond
  // keep_last (never the one just written) and temporary files left by dead
  // writers. Returns the path written.
  std::string save(const Checkpoint& ck);

  // The newest checkpoint that reads back whole. A truncated or corrupt one is
  // reported through `warn` (one line naming the file and the problem) and the
  // previous one is tried. An incompatible one throws (see check_compatible).
  // nullopt when the directory is missing, empty, or holds nothing readable.
  std::optional<Checkpoint> load_latest(const Compatibility& expect,
                                        const std::function<void(const std::string&)>& warn) const;

  // Checkpoint files present, oldest step first (temporary files excluded).
  std::vector<std::string> list() const;
  std::string path_for(int64_t step) const;
  const std::string& dir() const { return dir_; }

 private:
  void prune(const std::string& keep) const;
  void remove_stale_tmp() const;

  std::string dir_;
  int64_t keep_last_;
};

}  // namespace artel::train
