// The checkpoint file: named tensors, metadata and RNG states in one
// self-describing file (after llm.c's headers), every byte covered by a CRC.
// A sharded checkpoint (checkpoint_store.h) is one such file per worker —
// its shard — plus a manifest.
//
//   Checkpoint ck;
//   ck.step = step;                       // optimizer steps done
//   ck.meta = {{"rank", 3}};              // any JSON object
//   ck.add("model/" + name, part);        // aliases the live tensor: no copy
//   ck.rng = {rng.state()};
//   write_checkpoint(dir + "/rank-00003.artel", ck);   // atomically
//   CheckpointFile f(dir + "/rank-00003.artel");       // header checked; read(name) one tensor at a time
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
  uint32_t header_crc = 0;  // the CRC32 the file ends with: it covers the table, so every tensor's CRC
  uint64_t file_bytes = 0;
  int64_t step = 0;
  int64_t sampler_position = 0;
  nlohmann::json meta;
  std::vector<RngState> rng;
  std::vector<CheckpointTensorInfo> tensors;
};
CheckpointHeader read_checkpoint_header(const std::string& path);

// An open checkpoint file whose header passed every check; tensors are read
// one at a time, each checked against its CRC (a shard is read only for the
// parts a worker needs).
//
//   CheckpointFile f(path);
//   if (f.find("model/fc.weight")) Tensor t = f.read("model/fc.weight");
class CheckpointFile {
 public:
  explicit CheckpointFile(std::string path);
  ~CheckpointFile();
  CheckpointFile(const CheckpointFile&) = delete;
  CheckpointFile& operator=(const CheckpointFile&) = delete;

  const CheckpointHeader& header() const { return header_; }
  const std::string& path() const { return path_; }
  // The table entry of `name`, or null.
  const CheckpointTensorInfo* find(const std::string& name) const;
  // Tensor `name`, CRC-checked; a missing one or bad data is an Error naming the file.
  Tensor read(const std::string& name) const;

 private:
  std::string path_;
  int fd_ = -1;
  CheckpointHeader header_;
};

// What a run expects of a checkpoint it resumes from: the same model. The
// layout and world size may differ (checkpoints are resharded at load,
// checkpoint_reader.h); another model is refused: resuming it would be a
// user error, never a reason to fall back to an older checkpoint.
struct Compatibility {
  std::string model_kind;                   // "gpt", "mlp", "cnn"
  nlohmann::json model_config = nlohmann::json::object();  // what shapes the parameters
  // The whole model's parameters, {"name": [dims], ...}, and the optimizer
  // with the state it keeps, {"name": "adamw", "state": ["exp_avg", ...]}.
  // A model of the user's own has no config to compare: a wider layer or a
  // parameter more was found only while its weights were read in place, and
  // the run fell back to a fresh start on weights half the checkpoint's.
  // Empty: not compared (checkpoints written before 2026-11-30 lack them).
  nlohmann::json parameters = nlohmann::json::object();
  nlohmann::json optimizer = nlohmann::json::object();
  // The model's buffers, {"name": "int64 [1]", ...}: kept in checkpoints
  // since 2026-11-30 (before, they were lost at a resume).
  nlohmann::json buffers = nlohmann::json::object();

  // {"model_kind", "model_config", "parameters", "optimizer", "buffers"} (the last three when given).
  nlohmann::json to_meta() const;
};

// Throws an Error naming the file and each differing field (kind, config
// keys, parameters, optimizer) with a hint, unless `meta` holds the model
// `expect` describes.
void check_compatible(const nlohmann::json& meta, const Compatibility& expect, const std::string& path);

}  // namespace artel::train
