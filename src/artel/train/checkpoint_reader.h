// ShardedCheckpoint: a complete sharded checkpoint opened for reading under
// any layout (checkpoint_store.h writes them). Opening checks the manifest
// and every shard's header against it — sizes and header CRCs, so a shard
// rewritten, cut short or missing makes the checkpoint torn — without reading
// tensor data; each tensor's data is CRC-checked when read.
//
// A worker reads only what overlaps its own parts: a wanted region that the
// parts of one layout cover (the same tensor-parallel part, any ZeRO ranges)
// is copied from them; any other is cut from the whole tensor, put together
// from its parts — one whole tensor at a time, never the whole model.
//
//   ShardedCheckpoint ck(store.path_for(20));            // throws a one-line Error when torn
//   for (HeldPart& p : wanted) found.push_back(ck.read(p));
//   Tensor w = ck.read_whole("model/transformer.wte.weight");   // export
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "artel/train/checkpoint.h"
#include "artel/train/checkpoint_manifest.h"
#include "artel/train/held_part.h"

namespace artel::train {

class ShardedCheckpoint {
 public:
  // `dir`: a checkpoint directory (DIR/ckpt-<step>).
  explicit ShardedCheckpoint(std::string dir);
  ~ShardedCheckpoint();

  const Manifest& manifest() const { return manifest_; }
  const std::string& dir() const { return dir_; }
  // Fills want.data with its region of tensor want.key; false when the
  // checkpoint holds no such tensor. Another dtype or whole shape is an
  // Error naming both (false for a part marked absent_if_different).
  bool read(HeldPart& want) const;
  // Tensor `key` whole (an Error naming it when there is none).
  Tensor read_whole(const std::string& key) const;

 private:
  const CheckpointFile& file(const std::string& name) const;
  Tensor assemble(const ManifestTensor& t) const;

  std::string dir_;
  Manifest manifest_;
  std::vector<std::unique_ptr<CheckpointFile>> files_;  // by manifest_.shards index
};

// The newest complete checkpoint under `path` — a checkpoint directory, a
// directory of them (OUT/checkpoints), or a run's directory (OUT, holding
// checkpoints/) — skipping torn ones with a line to `warn` each ("skipping
// checkpoint DIR/ckpt-00000020/rank-00001.artel: truncated ...; trying
// DIR/ckpt-00000010"). Null when there is none; an Error when `path` is no
// directory or a torn checkpoint directory.
std::unique_ptr<ShardedCheckpoint> open_newest_checkpoint(const std::string& path,
                                                          const std::function<void(const std::string&)>& warn);
// The same, but none is an Error, whose hint names the run's
// final.safetensors when `path` holds one.
std::unique_ptr<ShardedCheckpoint> newest_checkpoint(const std::string& path,
                                                     const std::function<void(const std::string&)>& warn);

// The checkpoint directories under a directory of them, newest first, and
// the line saying one is skipped for `problem` (which names the file).
std::vector<std::string> checkpoints_newest_first(const std::string& dir);
std::string skipping_line(const std::string& problem, const std::string& next);

// An error's message without its hint (which suits a user, not a log line).
std::string problem_of(const Error& e);

}  // namespace artel::train
