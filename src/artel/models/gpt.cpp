#include "artel/models/gpt.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "artel/autograd/ops.h"
#include "artel/models/generate.h"

namespace artel::models {

Gpt::Transformer::Transformer(const ModelConfig& c, std::shared_ptr<Rng> drop_rng) {
  const nn::Init std = nn::Init::normal(0.0f, 0.02f);
  const BlockInit block{.std = 0.02f, .residual_std = 0.02f / std::sqrt(2.0f * static_cast<float>(c.n_layer))};
  wte = register_module("wte", std::make_shared<nn::Embedding>(c.vocab_size, c.n_embd, std));
  wpe = register_module("wpe", std::make_shared<nn::Embedding>(c.block_size, c.n_embd, std));
  drop = register_module("drop", std::make_shared<nn::Dropout>(c.dropout, drop_rng));
  h = register_module("h", std::make_shared<nn::ModuleList<Block>>());
  for (int64_t i = 0; i < c.n_layer; ++i)
    h->add(std::make_shared<Block>(c.n_embd, c.n_head, c.dropout, block, drop_rng, nn::parse_gelu(c.gelu)));
  ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(c.n_embd));
}

// The plan (gpt.h): how the one definition is cut into stages and split over
// a tensor-parallel group.
Gpt::Gpt(const ModelConfig& config) : Model(config) {
  ARTEL_CHECK(config.kind == "gpt", "Gpt built from a config of kind '", config.kind, "'");
  transformer_ = register_module("transformer", std::make_shared<Transformer>(config, shared_dropout_rng()));
  register_alias("lm_head.weight", "transformer.wte.weight");

  nn::ParallelPlan plan;
  plan.pieces.push_back({.name = "embed",
                         .modules = {"transformer.wte", "transformer.wpe", "transformer.drop"},
                         .forward = [this](const nn::Activations& in) { return embed(in); },
                         .layer = false});
  for (size_t i = 0; i < transformer_->h->size(); ++i) {
    const std::string path = "transformer.h." + std::to_string(i);
    plan.pieces.push_back({.name = "h." + std::to_string(i), .modules = {path}, .forward = [this, i](const nn::Activations& in) {
                             return nn::Activations{(*transformer_->h)[i].forward(in.at(0))};
                           }});
  }
  plan.pieces.push_back({.name = "head",
                         .modules = {"transformer.ln_f", "transformer.wte"},  // wte: the tied lm_head
                         .forward = [this](const nn::Activations& in) { return head(in); },
                         .layer = false});
  using nn::TensorParallelStyle;
  const int64_t head = config.n_embd / config.n_head;  // a rank holds whole heads
  plan.tensor_parallel = {{"transformer.wte", TensorParallelStyle::vocab},
                          {"transformer.h.*.attn.c_attn", TensorParallelStyle::column, /*groups=*/3, /*unit=*/head},
                          {"transformer.h.*.attn.c_proj", TensorParallelStyle::row, /*groups=*/1, /*unit=*/head},
                          {"transformer.h.*.mlp.c_fc", TensorParallelStyle::column},
                          {"transformer.h.*.mlp.c_proj", TensorParallelStyle::row}};
  plan.vocab_parallel_logits = "transformer.wte";
  set_plan(std::move(plan));
}

nn::Activations Gpt::embed(const nn::Activations& in) {
  const Tensor& ids = in.at(0).value();
  const Tensor pos = token_positions(ids, "gpt", config().block_size);
  Variable x = autograd::add(transformer_->wte->forward(ids), transformer_->wpe->forward(pos));  // (B, T, C)
  return {transformer_->drop->forward(x)};
}

nn::Activations Gpt::head(const nn::Activations& in) {
  return {transformer_->wte->attend(transformer_->ln_f->forward(in.at(0)))};  // (B, T, V), tied lm_head
}

std::vector<int64_t> Gpt::generate(const std::vector<int64_t>& prompt, int64_t max_new_tokens, float temperature,
                                   int64_t top_k, Rng& rng) {
  const ModelConfig& c = config();
  autograd::NoGradGuard no_grad;
  nn::EvalMode eval_mode(*this);
  return models::generate(prompt, max_new_tokens,
                          {.temperature = temperature, .top_k = top_k, .context = c.block_size, .vocab = c.vocab_size},
                          rng, [&](const Tensor& ids) {
                            Tensor logits = forward(ids).value();  // (1, T, V)
                            const float* last = logits.data<float>() + (ids.size(1) - 1) * c.vocab_size;
                            return std::vector<float>(last, last + c.vocab_size);
                          });
}

}  // namespace artel::models
