// How the whole GPT (models/gpt.h) is cut up for model parallelism, as pure
// functions of names and sizes: which contiguous blocks each pipeline stage
// holds, which stage holds a parameter, and how a parameter is divided among
// the T ranks of a tensor-parallel group (Megatron's split). Loading a shard
// from the whole model, and putting the whole model back together from the
// shards (final.safetensors, checkpoints), both go through these, so the
// split is written once.
//
//   auto stages = balanced_stages(cfg, /*stages=*/2);        // {{0, 2}, {2, 4}}
//   auto timed = balanced_stages(cfg, 2, measured_costs);     // by milliseconds instead
//   ShardKind k = shard_kind("transformer.h.0.attn.c_attn.weight");   // qkv_rows
//   Tensor mine = take_shard(full, k, /*part=*/1, /*parts=*/2);
//   Tensor back = join_shards({part0, part1}, k);            // == full
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "artel/core/tensor.h"
#include "artel/models/model.h"

namespace artel::parallel {

// The blocks [first, last) of one pipeline stage.
struct BlockRange {
  int64_t first = 0;
  int64_t last = 0;
  int64_t size() const { return last - first; }
  bool operator==(const BlockRange&) const = default;
};

// What the pieces of the GPT weigh when it is cut into stages: one block (all
// blocks are alike), the embeddings (first stage only) and the head — final
// LayerNorm, lm_head and loss (last stage only). Either parameter counts, or
// measured milliseconds of a micro-batch's forward + backward
// (GptShard::measure_costs): the two disagree most on the head, which holds
// almost no parameters of its own (it is tied to wte) but computes the
// largest matrix product when the vocabulary is large.
struct PieceCosts {
  double embeddings = 0;
  double block = 0;
  double head = 0;
};
PieceCosts parameter_costs(const models::ModelConfig& cfg);

// Contiguous, non-empty ranges of the n_layer blocks, one per stage, that
// minimise the largest stage's cost; ties go to the earliest cut. Throws when
// there are more stages than blocks. Without costs: parameter_costs(cfg).
std::vector<BlockRange> balanced_stages(const models::ModelConfig& cfg, int stages, const PieceCosts& costs);
std::vector<BlockRange> balanced_stages(const models::ModelConfig& cfg, int stages);
// An explicit split: blocks per stage (e.g. {1, 3}); each >= 1, summing to n_layer.
std::vector<BlockRange> explicit_stages(const models::ModelConfig& cfg, const std::vector<int64_t>& blocks_per_stage);

// The stage that holds a parameter of the whole model. The token embedding
// lives on the first stage; the last stage keeps a copy for the tied lm_head
// (see holds_copy_of_embedding).
int stage_of(const std::string& full_name, const std::vector<BlockRange>& stages);
bool is_tied_embedding(const std::string& full_name);  // transformer.wte.weight

// How one parameter is divided among T tensor-parallel ranks (Megatron):
//   rows     wte (vocab-parallel), mlp.c_fc weight and bias (column-parallel)
//   qkv_rows attn.c_attn weight and bias: rows of each of q, k and v (heads)
//   columns  attn.c_proj and mlp.c_proj weights (row-parallel)
//   replicated everything else (LayerNorms, wpe, row-parallel biases)
enum class ShardKind { replicated, rows, columns, qkv_rows };
ShardKind shard_kind(const std::string& full_name);
const char* shard_kind_name(ShardKind kind);

// Part `part` of `parts` of a whole tensor (a new tensor; replicated: a copy).
Tensor take_shard(const Tensor& full, ShardKind kind, int part, int parts);
// The whole tensor from its parts in rank order (replicated: the first).
Tensor join_shards(const std::vector<Tensor>& parts, ShardKind kind);

}  // namespace artel::parallel
