// A sharded checkpoint's model consolidated into the single-worker weights
// file (DeepSpeed's zero_to_fp32): the names and shapes final.safetensors
// has, whatever layout wrote the checkpoint, streamed one whole tensor at a
// time (nn::SafetensorsWriter), so nothing ever holds the whole model.
//
//   auto ck = newest_checkpoint("runs/gpt", warn);   // its checkpoints/: the newest complete one
//   export_weights(*ck, "step20.safetensors");
#pragma once

#include <string>

#include "artel/train/checkpoint_reader.h"

namespace artel::train {

// Writes every "model/<name>" tensor of `ck` as <name> to `path`
// (atomically), with final.safetensors's metadata: format "pt", the model
// kind and the checkpoint's step.
void export_weights(const ShardedCheckpoint& ck, const std::string& path);

}  // namespace artel::train
