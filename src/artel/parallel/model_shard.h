// ModelShard: the part of a model (nn/model.h) one worker holds under
// pipeline and tensor parallelism, made by applying the model's own plan
// (nn/parallel_plan.h) to the model — there is no second definition of any
// model. The model is built declared (no storage); the shard
//   - keeps the pieces of its pipeline stage and materialises only the
//     parameters those pieces use (a weight used by pieces of two stages,
//     such as a GPT's tied embedding, on both);
//   - gives every layer the plan splits over the tensor-parallel group its
//     shard of each parameter (nn/split.h) and the collectives around it
//     (tensor_parallel.h): Megatron's column, row and vocabulary splits;
//   - draws its parameters from the seed exactly as the whole model would
//     be drawn there, or takes them from whole tensors one at a time.
// Parameters keep the whole model's names, and per name the shard knows the
// split and the stages holding it, so checkpoints, weights files and norms
// read the declaration rather than guessing from names.
//
//   auto model = models::declare_model(cfg);
//   ModelShard shard(*model, {.stages = balanced, .stage = 1, .tp = tp_group.get()});
//   shard.materialize(seed);
//   Activations out = shard.forward({Variable(input)});   // this stage's pieces
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "artel/comm/process_group.h"
#include "artel/nn/model.h"
#include "artel/nn/split.h"
#include "artel/parallel/stages.h"

namespace artel::parallel {

using autograd::Variable;

struct ShardPlace {
  std::vector<PieceRange> stages;      // every (virtual) stage's pieces; empty = one stage of all pieces
  int stage = 0;                       // this worker's
  comm::ProcessGroup* tp = nullptr;    // the tensor-parallel group; null = none
  int tp_degree = 1;                   // without a group: the degree to check the plan against
  // Model chunks a stage (the interleaved schedule): `stages` then lists
  // P·chunks virtual stages in pipeline order, and stage s holds virtual
  // stages s, s + P, s + 2P, ... (Megatron's virtual pipeline).
  int chunks = 1;
  // Megatron's sequence parallelism with tp (sequence_parallel.h): the
  // stream of the plan's layer pieces is split by tokens over the group
  // (Note [The sequence-parallel region] in model_shard.cpp).
  bool sequence_parallel = false;
};

// What the plan makes of one parameter of the whole model.
struct ParameterPlacement {
  std::string name;
  Shape shape;               // whole
  nn::Split split;           // over the tensor-parallel group
  std::vector<int> stages;   // that hold it, ascending; a tied weight has several
};

class ModelShard {
 public:
  // Applies the plan; throws Error naming the rule or the parameter when it
  // does not fit the model (a pattern matching nothing, a split that does not
  // divide). Materialises nothing yet. The model must outlive the shard.
  ModelShard(nn::Model& model, ShardPlace place);

  // Draws this worker's parameters (Note [Declared parameters]).
  void materialize(uint64_t seed);
  // Fills this worker's parameters from whole tensors, asked for by name one
  // at a time (a weights file, a checkpoint); throws naming a missing one.
  void load(const std::function<Tensor(const std::string&)>& whole);

  // This worker's parameters, in model order, whole-model names.
  nn::NamedParameters parameters() const;
  const ParameterPlacement& placement(const std::string& name) const;
  const std::vector<ParameterPlacement>& placements() const { return placements_; }

  // This stage's pieces of model chunk `chunk` on `in` (the batch input on
  // the first stage's chunk 0).
  nn::Activations forward(const nn::Activations& in, int chunk = 0);
  // Sequence parallelism on (the default) or off until switched back: a
  // forward-only pass (evaluation, sampling) of any token count runs as
  // plain tensor parallelism, the same results. Every rank of the group, and
  // every stage, must switch alike.
  void split_tokens(bool on) { *tokens_split_ = on; }
  // Mean cross-entropy of the logits (the last stage's output) against
  // `targets`: vocabulary-parallel over the group when the plan splits the logits.
  Variable loss(const Variable& logits, const Tensor& targets);
  // The logits of the last position of `logits` (the last stage's output,
  // (1, T, V) or this rank's vocabulary columns of it) over the whole
  // vocabulary: gathered over the tensor-parallel group when the plan splits
  // them, padding dropped. Collective over that group.
  std::vector<float> last_logits(const Variable& logits);

  bool first_stage() const { return place_.stage == 0; }
  bool last_stage() const { return place_.stage == stages() - 1; }
  // Whether chunk `chunk` here takes the batch's input / makes the loss.
  bool starts_pipeline(int chunk) const { return first_stage() && chunk == 0; }
  bool ends_pipeline(int chunk) const { return last_stage() && chunk == place_.chunks - 1; }
  int stage() const { return place_.stage; }
  int stages() const { return static_cast<int>(place_.stages.size()) / place_.chunks; }
  int chunks() const { return place_.chunks; }
  // The pieces of this worker's chunks, in chunk order.
  std::vector<PieceRange> held_pieces() const;
  int tp_rank() const { return place_.tp ? place_.tp->rank() : 0; }
  int tp_size() const { return place_.tp ? place_.tp->size() : 1; }
  // The tied weights of this stage: parameters that other stages hold too.
  std::vector<std::pair<std::string, Variable>> tied() const;
  const std::vector<PieceRange>& stage_pieces() const { return place_.stages; }  // every virtual stage's
  nn::Model& model() { return model_; }

 private:
  void check_stages_cover(int64_t pieces) const;
  void apply_tensor_parallel();
  void apply_sequence_parallel();
  void place_parameters();
  bool splits_tokens() const { return place_.sequence_parallel && place_.tp && *tokens_split_; }
  // Piece i's input, carried into or out of the sequence-parallel region when it starts or ends there.
  nn::Activations crossing_into(size_t piece, nn::Activations in);

  nn::Model& model_;
  ShardPlace place_;
  std::vector<ParameterPlacement> placements_;
  std::map<std::string, size_t> index_;   // name -> placements_
  nn::NamedParameters mine_;
  int64_t logits_first_ = 0, logits_vocab_ = -1;  // the split logits' columns (vocab_parallel_logits)
  std::shared_ptr<bool> tokens_split_ = std::make_shared<bool>(true);  // split_tokens(), read by the layers' functions
};

// The parameter count each piece uses (its cost for balancing by size; a
// tied weight counts in every piece that uses it).
std::vector<double> piece_parameter_counts(const nn::Model& model);
// Which pieces are layers (nn::Piece::layer).
std::vector<bool> piece_layers(const nn::Model& model);

}  // namespace artel::parallel
