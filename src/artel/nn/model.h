// Model: what artel trains — a Module whose forward maps one batch input to
// logits, with the plan that says how it splits (nn/parallel_plan.h). The
// bundled GPT, MLP and CNN (models/) are written this way, and so is a
// user's model: declare the layers, the pieces and the tensor-parallel
// rules; forward, by default, runs the pieces in order, so a pipeline stage
// runs exactly the code one worker runs.
//
//   class TwoLayer : public nn::Model {
//    public:
//     TwoLayer() {
//       fc1_ = register_module("fc1", std::make_shared<nn::Linear>(784, 256));
//       fc2_ = register_module("fc2", std::make_shared<nn::Linear>(256, 10));
//       set_plan({.pieces = {layer_piece("fc1", *fc1_), layer_piece("fc2", *fc2_)}});
//     }
//   };
//   nn::materialize(model, seed);
//   Variable logits = model.forward(x);
#pragma once

#include <memory>
#include <string>

#include "artel/core/rng.h"
#include "artel/nn/layer.h"
#include "artel/nn/module.h"
#include "artel/nn/parallel_plan.h"
#include "artel/nn/sequential.h"

namespace artel::nn {

// What backward recomputes instead of keeping (Korthikanti et al. 2022):
// `full` keeps only each layer piece's input and reruns the piece during
// backward; `selective` reruns only what a model marks as its cheap-to-redo,
// large-to-keep core (a GPT's softmax and attention over V); `none` keeps all.
enum class Recompute { none, selective, full };
Recompute parse_recompute(const std::string& name);  // "none" | "selective" | "full"

// Called around every piece run_pieces runs: how ZeRO-3 gathers a piece's
// weights just before its forward and frees them after
// (parallel/fully_sharded.h).
class PieceHooks {
 public:
  virtual ~PieceHooks() = default;
  virtual void before_forward(size_t piece) = 0;
  // The piece's outputs, which the hook may wrap (for their backward).
  virtual Activations after_forward(size_t piece, Activations out) = 0;
};

// The hooks of a model's pieces, held by both the model and the hooks' owner
// (FSDP), which empties it when it goes: a model that outlives its FSDP then
// refuses to run (its weights went with it) instead of calling into freed
// memory, and an owner that outlives its model never has to touch it.
struct PieceHooksLink {
  PieceHooks* hooks = nullptr;  // null once the owner is gone
  std::string owner;            // for messages: "FullyShardedDataParallel"
};

class Model : public Module {
 public:
  // The input (ids, images, ...) -> logits, with the graph recorded. By
  // default: the plan's pieces in order, the input entering the first.
  virtual Variable forward(const Tensor& input);
  const ParallelPlan& plan() const { return plan_; }
  // The generator of the model's dropout masks, if it has one: checkpoints
  // save its state, so a resumed run draws the masks an uninterrupted one would.
  virtual Rng* dropout_rng() { return nullptr; }
  // How this model's forward saves for backward from now on. A model with
  // a selective core overrides this to mark it (and calls this base).
  virtual void set_recompute(Recompute mode) { recompute_ = mode; }
  Recompute recompute() const { return recompute_; }
  // Runs pieces [first, last) of the plan on `in`; with Recompute::full, a
  // layer piece of one input and one output whose modules no other piece
  // uses is recomputed during backward (autograd/checkpoint.h).
  Activations run_pieces(size_t first, size_t last, Activations in);
  // Hooks around each piece from now on (null: none). The model does not own
  // them; a model whose pieces are hooked by a live owner refuses another.
  void set_piece_hooks(std::shared_ptr<PieceHooksLink> link);
  // Throws when a live owner hooks the pieces already: a second wrapper calls
  // it before it draws anything (it would re-cut the first one's shards).
  void check_pieces_unhooked() const;

 protected:
  void set_plan(ParallelPlan plan);

 private:
  Activations run_piece(size_t i, Activations in);  // recomputed or not

  ParallelPlan plan_;
  std::vector<bool> shared_;  // per piece: uses a module another piece uses too (a tied weight)
  Recompute recompute_ = Recompute::none;
  std::shared_ptr<PieceHooksLink> hooks_;
};

// A piece made of one Layer registered at `path` (the model owns the layer).
Piece layer_piece(const std::string& path, Layer& layer);
// One piece per layer of a Sequential registered at `path` ("net.0", "net.1", ...).
std::vector<Piece> sequential_pieces(const std::string& path, const Sequential& seq);

}  // namespace artel::nn
