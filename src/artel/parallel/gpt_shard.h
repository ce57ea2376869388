// GptShard: the part of the GPT (models/gpt.h) one worker holds under
// pipeline and tensor parallelism — the blocks of its pipeline stage, the
// embeddings on the first stage, the final LayerNorm and the tied lm_head on
// the last, each matrix split over the tensor-parallel group when there is
// one (gpt_tensor_parallel_block.h, a vocabulary-parallel wte and
// cross-entropy). Parameters keep the whole model's names
// (transformer.h.<global index>...), so a shard loads from, and gives back
// to, a single-worker state dict through gpt_sharding.h.
//
// The tied embedding: with several stages the last one keeps its own copy of
// wte for the lm_head; both copies start equal and their gradients are
// summed across the two stages before each update (Megatron's embedding
// group), so they stay equal.
//
//   GptShard s(cfg, {.stage = 1, .stages = 2, .blocks = {2, 4}, .tp = tp_group.get()});
//   s.load_from_full(full_model.state_dict());
//   Variable loss = s.forward(ids, hidden_in, targets);   // the last stage: mean cross-entropy
#pragma once

#include <memory>

#include "artel/comm/process_group.h"
#include "artel/core/rng.h"
#include "artel/models/model.h"
#include "artel/nn/module.h"
#include "artel/parallel/gpt_sharding.h"

namespace artel::parallel {

using autograd::Variable;

struct ShardPlace {
  int stage = 0;
  int stages = 1;
  BlockRange blocks;                   // this stage's blocks
  comm::ProcessGroup* tp = nullptr;    // the tensor-parallel group; null = none (T = 1)
};

class GptShard : public nn::Module {
 public:
  // Throws Error when the heads or the vocabulary do not split over the group.
  GptShard(const models::ModelConfig& cfg, const ShardPlace& place);

  bool first_stage() const { return place_.stage == 0; }
  bool last_stage() const { return place_.stage == place_.stages - 1; }
  int tp_rank() const { return place_.tp ? place_.tp->rank() : 0; }
  int tp_size() const { return place_.tp ? place_.tp->size() : 1; }
  const ShardPlace& place() const { return place_; }
  const models::ModelConfig& config() const { return cfg_; }

  // This stage's forward. The first stage reads `ids` (B, T); the others take
  // the previous stage's output `input` (B, T, C). Returns the hidden state
  // (B, T, C) for the next stage, or on the last stage the mean cross-entropy
  // of the logits against `targets` (B·T int64).
  Variable forward(const Tensor& ids, const Variable& input, const Tensor& targets);

  // Copies this shard's part of every parameter from the whole model's state
  // dict (single-worker names); a missing name is an Error.
  void load_from_full(const nn::StateDict& full);

  Rng& dropout_rng() { return *dropout_rng_; }

  // Milliseconds of one forward + backward of each piece (balanced_stages'
  // PieceCosts) on a micro-batch of `rows` sequences of block_size tokens:
  // the fastest of `repeats` runs after one warm-up. Needs a shard holding the
  // whole model (one stage, no tensor parallelism); leaves no gradients.
  PieceCosts measure_costs(int64_t rows, int repeats);

 private:
  Variable embed(const Tensor& ids);
  Variable head_loss(const Variable& x, const Tensor& targets);

  models::ModelConfig cfg_;
  ShardPlace place_;
  std::shared_ptr<Rng> dropout_rng_;
  struct Trunk;
  std::shared_ptr<Trunk> transformer_;
};

}  // namespace artel::parallel
