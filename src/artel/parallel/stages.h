// How a model's pieces (nn/parallel_plan.h) are cut into pipeline stages, as
// pure functions of the pieces' kinds and costs. Only layer pieces are
// counted and balanced; a piece that is no layer (a GPT's embeddings and
// head) joins the nearest layer before it, or the first one — so the first
// stage holds the embeddings and the last the head, as Megatron's and
// DeepSpeed's pipelines do.
//
//   std::vector<bool> layer = {false, true, true, true, true, false};   // embed, h.0-3, head
//   auto s = balanced_stages(layer, costs, /*stages=*/2);              // {{0, 3}, {3, 6}}
//   auto e = explicit_stages(layer, {1, 3});                           // {{0, 2}, {2, 6}}
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace artel::parallel {

// Pieces [first, last) of one stage.
struct PieceRange {
  int64_t first = 0;
  int64_t last = 0;
  int64_t size() const { return last - first; }
  bool operator==(const PieceRange&) const = default;
};

// Contiguous stages, each with at least one layer, that minimise the largest
// stage's cost (the sum of its pieces'); ties go to the earliest cut. Throws
// when there are more stages than layers.
std::vector<PieceRange> balanced_stages(const std::vector<bool>& is_layer, const std::vector<double>& costs,
                                        int stages);
// An explicit split: layers per stage (e.g. {1, 3}); each >= 1, summing to the layers.
std::vector<PieceRange> explicit_stages(const std::vector<bool>& is_layer, const std::vector<int64_t>& layers_per_stage);
// The layers of each stage ("[0,2) [2,4)" in layer numbers, for messages).
std::vector<PieceRange> layers_of(const std::vector<bool>& is_layer, const std::vector<PieceRange>& stages);
// What stage `stage` of `stages` holds of `ranges` (every virtual stage's, in
// pipeline order: stage s holds s, s + stages, ...), as messages print it:
// "[2,4)", or its chunks' runs "[1,2)+[3,4)".
std::string stage_runs(const std::vector<PieceRange>& ranges, int stages, int stage);

}  // namespace artel::parallel
