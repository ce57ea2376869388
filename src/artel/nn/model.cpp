#include "artel/nn/model.h"

#include "artel/core/error.h"

namespace artel::nn {

Activations run_pieces(const ParallelPlan& plan, size_t first, size_t last, Activations in) {
  ARTEL_CHECK(first <= last && last <= plan.pieces.size(), "pieces [", first, ", ", last, ") of ", plan.pieces.size());
  for (size_t i = first; i < last; ++i) in = plan.pieces[i].forward(in);
  return in;
}

Variable Model::forward(const Tensor& input) {
  ARTEL_CHECK(!plan_.pieces.empty(), "this model declares no pieces: override forward() or set_plan() its pieces");
  Activations out = run_pieces(plan_, 0, plan_.pieces.size(), {Variable(input)});
  ARTEL_CHECK(out.size() == 1, "the last piece returned ", out.size(), " tensors, the logits must be one");
  return out[0];
}

Piece layer_piece(const std::string& path, Layer& layer) {
  return {.name = path, .modules = {path}, .forward = [&layer](const Activations& in) {
            ARTEL_CHECK(in.size() == 1, "layer piece: expected one input, got ", in.size());
            return Activations{layer.forward(in[0])};
          }};
}

std::vector<Piece> sequential_pieces(const std::string& path, const Sequential& seq) {
  std::vector<Piece> pieces;
  for (size_t i = 0; i < seq.size(); ++i) pieces.push_back(layer_piece(path + "." + std::to_string(i), seq[i]));
  return pieces;
}

}  // namespace artel::nn
