#include "artel/models/word_lm.h"

#include <cmath>

#include "artel/autograd/ops.h"

namespace artel::models {

WordLm::WordLm(const ModelConfig& c) : Model(c) {
  ARTEL_CHECK(c.kind == "wordlm", "WordLm built from a config of kind '", c.kind, "'");
  const nn::Init std = nn::Init::normal(0.0f, 0.02f);
  const BlockInit block{.std = 0.02f, .residual_std = 0.02f / std::sqrt(2.0f * static_cast<float>(c.n_layer))};
  embed_ = register_module("embed", std::make_shared<nn::Embedding>(c.vocab_size, c.n_embd, std));
  embed_->set_sparse(true);
  pos_ = register_module("pos", std::make_shared<nn::Embedding>(c.block_size, c.n_embd, std));
  drop_ = register_module("drop", std::make_shared<nn::Dropout>(c.dropout, shared_dropout_rng()));
  h_ = register_module("h", std::make_shared<nn::ModuleList<Block>>());
  for (int64_t i = 0; i < c.n_layer; ++i)
    h_->add(std::make_shared<Block>(c.n_embd, c.n_head, c.dropout, block, shared_dropout_rng(), nn::parse_gelu(c.gelu)));
  ln_f_ = register_module("ln_f", std::make_shared<nn::LayerNorm>(c.n_embd));
  proj_ = register_module("proj", std::make_shared<nn::Linear>(c.n_embd, kHeadFeatures, false, std, nn::Init::zeros()));
  out_ = register_module("out", std::make_shared<nn::Linear>(kHeadFeatures, c.vocab_size, true, std, nn::Init::zeros()));

  nn::ParallelPlan plan;
  plan.pieces.push_back({.name = "embed",
                         .modules = {"embed", "pos", "drop"},
                         .forward = [this](const nn::Activations& in) { return embed(in); },
                         .layer = false});
  for (size_t i = 0; i < h_->size(); ++i)
    plan.pieces.push_back({.name = "h." + std::to_string(i), .modules = {"h." + std::to_string(i)},
                           .forward = [this, i](const nn::Activations& in) {
                             return nn::Activations{(*h_)[i].forward(in.at(0))};
                           }});
  plan.pieces.push_back({.name = "head",
                         .modules = {"ln_f", "proj", "out"},
                         .forward = [this](const nn::Activations& in) { return head(in); },
                         .layer = false});
  // The blocks split as the GPT's (Megatron's pairs: attention by whole
  // heads, the MLP by its hidden features); the word table and the head stay
  // whole on every rank, as the MLP's outer layers do.
  using nn::TensorParallelStyle;
  const int64_t head = c.n_embd / c.n_head;
  plan.tensor_parallel = {{"h.*.attn.c_attn", TensorParallelStyle::column, /*groups=*/3, /*unit=*/head},
                          {"h.*.attn.c_proj", TensorParallelStyle::row, /*groups=*/1, /*unit=*/head},
                          {"h.*.mlp.c_fc", TensorParallelStyle::column},
                          {"h.*.mlp.c_proj", TensorParallelStyle::row}};
  set_plan(std::move(plan));
}

nn::Activations WordLm::embed(const nn::Activations& in) {
  const Tensor& ids = in.at(0).value();
  const Tensor positions = token_positions(ids, "wordlm", config().block_size);
  return {drop_->forward(autograd::add(embed_->forward(ids), pos_->forward(positions)))};
}

nn::Activations WordLm::head(const nn::Activations& in) {
  return {out_->forward(proj_->forward(ln_f_->forward(in.at(0))))};
}

}  // namespace artel::models
