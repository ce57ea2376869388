// ParallelPlan: how a model is split, declared by its author next to the
// model, which itself stays a single-worker definition. parallel/ reads the
// plan and applies it (torchtitan's and Hugging Face's per-model plans):
//
// - tensor_parallel: module path patterns -> how that module splits over a
//   tensor-parallel group: `column` (a Linear's output features; `groups`
//   sections such as q | k | v divided each on its own), `row` (a Linear's
//   input features; its output summed over the group), `vocab` (an
//   Embedding's rows, padded to a multiple of the group; its lookup summed,
//   its attend() giving this rank's logits). A column layer feeding a row
//   layer is Megatron's pair: one all-reduce forward, one backward.
// - pieces: the model as a sequence (DeepSpeed's LayerSpec list). A pipeline
//   cuts it into stages between pieces; each piece names the submodules
//   whose parameters it uses, so a stage builds only those. A module used by
//   pieces of two stages (a language model's embedding and its tied head) is
//   a tied weight: each of those stages holds a copy and their gradients are
//   summed. Whatever a piece returns crosses a stage boundary as it is.
// - vocab_parallel_logits: the vocab-split Embedding whose attend() makes
//   the logits, when it does; the loss is then the vocabulary-parallel
//   cross-entropy over the split logits.
//
//   ParallelPlan plan;
//   plan.tensor_parallel = {{"h.*.fc", TensorParallelStyle::column}, {"h.*.proj", TensorParallelStyle::row}};
//   plan.pieces.push_back({.name = "h.0", .modules = {"h.0"}, .forward = [this](const Activations& a) {
//     return Activations{h_[0]->forward(a[0])}; }});
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "artel/autograd/variable.h"

namespace artel::nn {

using autograd::Variable;
using Activations = std::vector<Variable>;

enum class TensorParallelStyle { column, row, vocab };
const char* style_name(TensorParallelStyle style);

struct TensorParallelRule {
  std::string pattern;  // a module path; '*' stands for one path component ("transformer.h.*.mlp.c_fc")
  TensorParallelStyle style = TensorParallelStyle::column;
  int64_t groups = 1;   // column: output sections divided each on its own (attention's q | k | v: 3)
  int64_t unit = 1;     // entries of the split dimension a rank holds only whole (an attention head's width)
};

struct Piece {
  std::string name;                  // for messages and stage listings: "embed", "h.0", "head"
  std::vector<std::string> modules;  // paths of the submodules whose parameters it uses
  std::function<Activations(const Activations&)> forward;
  // Counted by --stage-layers and kept apart by balancing; a piece that is
  // not a layer (a GPT's embeddings, its head) joins its neighbour's stage.
  bool layer = true;
};

struct ParallelPlan {
  std::vector<TensorParallelRule> tensor_parallel;
  std::vector<Piece> pieces;
  std::string vocab_parallel_logits;  // module path, "" when the logits are whole
};

// Whether a module path matches a pattern ('*' = exactly one component).
bool path_matches(const std::string& pattern, const std::string& path);
// Whether `path` names `module` or lies inside it ("a.b.c" is inside "a.b").
bool path_within(const std::string& path, const std::string& module);

}  // namespace artel::nn
