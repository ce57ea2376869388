// CheckpointStore: a directory of sharded checkpoints, as PyTorch DCP and
// DeepSpeed write them: every worker writes the parts it holds as its own
// shard, nothing is gathered, and a manifest written last says what makes
// up each whole tensor (checkpoint_manifest.h). The newest K are kept.
//
//   OUT/checkpoints/ckpt-00000020/rank-00000.artel   one per worker (checkpoint.h's file format)
//   OUT/checkpoints/ckpt-00000020/rank-00001.artel
//   OUT/checkpoints/ckpt-00000020/manifest.json       last, by the reporter
//
// Note [Sharded checkpoint commit]
// A checkpoint counts only once its manifest exists, and the manifest names
// each shard's size and header CRC (which covers every tensor's CRC), so a
// directory torn anywhere — a worker killed mid-write, a missing or
// rewritten shard, no manifest — never reads as complete:
//   1. the reporter removes a manifest an earlier attempt left for this step;
//   2. a barrier; every worker writes its shard (tmp, fsync, rename);
//   3. a barrier: every shard is durable;
//   4. the reporter reads the shards' headers (not their data), checks that
//      the parts tile every tensor exactly once, writes manifest.json
//      (tmp, fsync, rename, fsync the directory), prunes to the newest K
//      checkpoint directories and removes what dead writers left behind
//      (temporary files, shards of an earlier attempt with more workers).
//
//   CheckpointStore store(cfg.out + "/checkpoints", /*keep_last=*/3);
//   if (reporter) store.begin(step);   barrier();
//   store.write_shard(step, rank, strategy.held_parts(optimizer), dropout);   barrier();
//   if (reporter) store.commit(run);   // run: step, samples, layout, model
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "artel/core/rng.h"
#include "artel/train/checkpoint_manifest.h"
#include "artel/train/held_part.h"

namespace artel::train {

inline constexpr const char* kManifestName = "manifest.json";

// The dropout generator of one pipeline stage, as the worker that writes it holds it.
struct StageDropout {
  int stage = 0;
  RngState state;
};

// A run that starts afresh (no --resume) into a directory of an earlier
// run's checkpoints would write its own among them, and a restart after a
// failure would resume from the newest, which may be the earlier run's:
// refused, naming the newest, unless `dir` holds none.
void refuse_earlier_checkpoints(const std::string& dir);

class CheckpointStore {
 public:
  // keep_last >= 1, or 0 to keep every checkpoint. The directory is created on the first write.
  CheckpointStore(std::string dir, int64_t keep_last);

  // DIR/ckpt-<step, 8+ digits>.
  std::string path_for(int64_t step) const;
  // "rank-00003.artel".
  static std::string shard_name(int rank);

  // Step 1 of the commit, on the reporter only.
  void begin(int64_t step) const;
  // Step 2, on every worker: `parts` (with `dropout` when this worker
  // writes its stage's generator) as DIR/ckpt-<step>/rank-<rank>.artel,
  // atomically. Returns its path.
  std::string write_shard(int64_t step, int rank, const std::vector<HeldPart>& parts,
                          const std::optional<StageDropout>& dropout) const;
  // Step 4, on the reporter, after every worker's write_shard: `run` holds
  // step, samples, global batch, model and layout (shards, tensors and
  // dropout states come from the shards of workers 0 … world−1). Returns
  // the checkpoint's directory.
  std::string commit(Manifest run, int world) const;

  // Checkpoint directories, oldest step first (complete or not).
  std::vector<std::string> list() const;
  const std::string& dir() const { return dir_; }

 private:
  void prune(const std::string& keep) const;
  bool being_written(const std::string& ckpt) const;
  void remove_stale_tmp(const std::string& ckpt) const;
  void remove_other_shards(const std::string& ckpt, int world) const;

  std::string dir_;
  int64_t keep_last_;
};

}  // namespace artel::train
