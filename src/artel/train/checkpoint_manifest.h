// The manifest of a sharded checkpoint: the one file that says what the
// checkpoint holds and where (manifest.json, written last, checkpoint_store.h).
// Every whole tensor under its single-worker key, with its dtype, whole
// shape and the parts that make it up — the shard file, the name inside it
// and the region of the whole (Note [Regions of a whole tensor], held_part.h)
// — plus what the run needs to go on: step, samples consumed, global batch,
// the layout it was written under, the model, the dropout generators.
//
//   {"format": "artel-checkpoint", "version": 1, "step": 20,
//    "consumed_samples": 160, "global_batch": 8,
//    "model": {"model_kind": "gpt", "model_config": {...}},
//    "layout": {"world": 2, "dp": 2, "pp": 1, "tp": 1, "zero": 1, "batch_size": 4, "accum": 1},
//    "dropout": [{"seed", "stream", "counter", "used"}, ...],        // one per pipeline stage
//    "shards": [{"file": "rank-00000.artel", "bytes": 9408, "header_crc": 3141592653}, ...],
//    "tensors": [{"key": "model/transformer.wte.weight", "dtype": "f32", "shape": [65, 16],
//                 "parts": [{"file": "rank-00000.artel", "name": "model/transformer.wte.weight",
//                            "split": {"dim": 0, "groups": 1, "pad": true, "unit": 1},
//                            "part": 0, "parts": 2, "begin": 0, "end": 528}, ...]}, ...]}
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "artel/core/rng.h"
#include "artel/train/held_part.h"

namespace artel::train {

inline constexpr const char* kManifestFormat = "artel-checkpoint";
inline constexpr int kManifestVersion = 1;

struct ManifestPart {
  std::string file;  // the shard, a file name in the checkpoint's directory
  std::string name;  // the tensor inside it
  nn::Split split;
  int part = 0, parts = 1;
  optim::ElementRange range;
};

struct ManifestTensor {
  std::string key;
  DType dtype = DType::f32;
  Shape shape;                      // whole
  std::vector<ManifestPart> parts;  // tile the whole: every element in exactly one
};

struct ManifestShard {
  std::string file;
  uint64_t bytes = 0;
  uint32_t header_crc = 0;  // ties the manifest to these shards' contents (a rewritten shard does not match)
};

struct Manifest {
  int64_t step = 0;                  // optimizer steps done
  int64_t consumed_samples = 0;      // rows of the global order trained on (data/sampler.h)
  int64_t global_batch = 0;          // rows per step when written
  nlohmann::json model = nlohmann::json::object();   // Compatibility::to_meta()
  nlohmann::json layout = nlohmann::json::object();  // how the writing run was laid out
  std::vector<RngState> dropout;     // per pipeline stage
  std::vector<ManifestShard> shards;
  std::vector<ManifestTensor> tensors;

  const ManifestTensor* find(const std::string& key) const;
};

nlohmann::json manifest_to_json(const Manifest& m);
// One entry of "tensors", and back (parsed and checked field by field, not
// yet for tiling); a shard's header lists its parts in this form too.
nlohmann::json tensor_to_json(const ManifestTensor& t);
ManifestTensor tensor_from_json(const nlohmann::json& j, const std::string& path);
// Parses and validates (fields, dtypes, regions inside their tensors, parts
// tiling each tensor, files among the shards); errors name `path`.
Manifest manifest_from_json(const nlohmann::json& j, const std::string& path);

// Throws an Error naming `path` unless `t`'s parts cover every element of
// the whole tensor exactly once (one split for all of them).
void check_tiling(const ManifestTensor& t, const std::string& path);

// "2 workers (dp 2)", "4 workers (dp 1 x pp 2 x tp 2)": a layout for messages.
std::string describe_layout(const nlohmann::json& layout);

}  // namespace artel::train
