#include "artel/nn/model.h"

#include <set>

#include "artel/autograd/checkpoint.h"
#include "artel/core/error.h"

namespace artel::nn {

Recompute parse_recompute(const std::string& name) {
  if (name == "none") return Recompute::none;
  if (name == "selective") return Recompute::selective;
  if (name == "full") return Recompute::full;
  throw Error("unknown recompute mode '" + name + "'", "use none, selective or full");
}

void Model::set_plan(ParallelPlan plan) {
  // Checked here, where the plan is written: a piece without a forward threw
  // std::bad_function_call when run, and one naming a module that is not
  // there placed nothing and said nothing.
  std::set<std::string> modules;
  for (const auto& [path, _] : named_modules()) modules.insert(path);
  for (size_t i = 0; i < plan.pieces.size(); ++i) {
    const Piece& piece = plan.pieces[i];
    ARTEL_CHECK(piece.forward != nullptr, "plan: piece ", i, " ('", piece.name, "') has no forward",
                " (hint: nn::layer_piece builds one from a layer)");
    for (const std::string& m : piece.modules)
      ARTEL_CHECK(modules.count(m), "plan: piece ", i, " ('", piece.name, "') uses module '", m,
                  "', which the model does not have (hint: register_module it before set_plan)");
  }
  plan_ = std::move(plan);
  const std::vector<Piece>& pieces = plan_.pieces;
  shared_.assign(pieces.size(), false);
  for (size_t i = 0; i < pieces.size(); ++i)
    for (size_t j = i + 1; j < pieces.size(); ++j)
      for (const std::string& a : pieces[i].modules)
        for (const std::string& b : pieces[j].modules)
          if (path_within(a, b) || path_within(b, a)) shared_[i] = shared_[j] = true;
}

void Model::set_piece_hooks(std::shared_ptr<PieceHooksLink> link) {
  if (link) check_pieces_unhooked();
  hooks_ = std::move(link);
}

void Model::check_pieces_unhooked() const {
  ARTEL_CHECK(!hooks_ || !hooks_->hooks, "the model's pieces are hooked already by a ", hooks_ ? hooks_->owner : "",
              " (hint: wrap a model in one FullyShardedDataParallel at a time)");
}

Activations Model::run_pieces(size_t first, size_t last, Activations in) {
  ARTEL_CHECK(first <= last && last <= plan_.pieces.size(), "pieces [", first, ", ", last, ") of ", plan_.pieces.size());
  PieceHooks* hooks = hooks_ ? hooks_->hooks : nullptr;
  ARTEL_CHECK(!hooks_ || hooks, "the model's weights were sharded by a ", hooks_ ? hooks_->owner : "",
              " that is gone, and its shards with it (hint: run the model while it exists, or load the weights it "
              "wrote into a fresh model)");
  for (size_t i = first; i < last; ++i) {
    if (hooks) hooks->before_forward(i);
    in = run_piece(i, std::move(in));
    if (hooks) in = hooks->after_forward(i, std::move(in));
  }
  return in;
}

Activations Model::run_piece(size_t i, Activations in) {
  const Piece& piece = plan_.pieces[i];
  if (recompute_ != Recompute::full || !piece.layer || in.size() != 1 || shared_[i]) return piece.forward(in);
  Variable out = autograd::checkpoint(
      [&piece](const Variable& x) {
        Activations o = piece.forward({x});
        ARTEL_CHECK(o.size() == 1, "recompute: piece ", piece.name, " returned ", o.size(), " tensors, not one");
        return o[0];
      },
      in[0], dropout_rng());
  return {out};
}

Variable Model::forward(const Tensor& input) {
  ARTEL_CHECK(!plan_.pieces.empty(), "this model declares no pieces: override forward() or set_plan() its pieces");
  Activations out = run_pieces(0, plan_.pieces.size(), {Variable(input)});
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
