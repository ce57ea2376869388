// Gpt: nanoGPT's model, with its parameter names, layouts and order:
//   transformer.wte.weight (V, C), transformer.wpe.weight (block_size, C),
//   transformer.h.{i}.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}.{weight, bias},
//   transformer.ln_f.{weight, bias}
// lm_head is tied to wte: logits = ln_f(x)·wteᵀ with the same Variable, so it
// is no separate parameter; `lm_head.weight` is registered as an alias of
// `transformer.wte.weight` (written once, accepted on load). W2's config has
// 809,856 parameters. Init: N(0, 0.02) for Linear and Embedding weights,
// N(0, 0.02/√(2·n_layer)) for the residual projections (c_proj.weight), zero
// biases, LayerNorm ones / zeros. Dropout: see gpt_block.h.
//
// Its plan, declared in gpt.cpp next to the model: the pieces embed (wte,
// wpe, dropout), h.0 … h.{L-1}, head (ln_f and the tied wte), so a pipeline
// cuts between blocks and the embedding is a weight tied across the first
// and last stage; tensor parallelism as Megatron's — wte split by vocabulary
// (padded to a multiple of the group), c_attn and c_fc by output features
// (c_attn per q, k and v, so each rank holds whole heads), both c_proj by
// input features. The forward is the pieces in order, on one worker and on
// every layout.
//
//   Gpt gpt(ModelConfig{});                       // W2's baby GPT, declared
//   nn::materialize(gpt, seed);
//   Variable logits = gpt.forward(ids);           // ids (B, T) int64/int32, T <= block_size -> (B, T, V)
//   auto text = gpt.generate({0}, 100, 0.8f, 0, rng);
#pragma once

#include <vector>

#include "artel/models/gpt_block.h"
#include "artel/models/model.h"
#include "artel/nn/embedding.h"
#include "artel/nn/sequential.h"

namespace artel::models {

class Gpt : public Model {
 public:
  explicit Gpt(const ModelConfig& config);

  // Samples max_new_tokens tokens after `prompt` (ids in [0, vocab_size),
  // non-empty): each step feeds the last block_size tokens, divides the last
  // logits by `temperature` (> 0), keeps the top_k largest (0 = all) and draws
  // from the softmax with `rng`. Runs in eval mode with no graph; returns
  // prompt + new tokens.
  std::vector<int64_t> generate(const std::vector<int64_t>& prompt, int64_t max_new_tokens, float temperature,
                                int64_t top_k, Rng& rng);

 private:
  nn::Activations embed(const nn::Activations& ids);  // (B, T) -> (B, T, C)
  nn::Activations head(const nn::Activations& x);    // (B, T, C) -> (B, T, V)

  struct Transformer : nn::Module {
    std::shared_ptr<nn::Embedding> wte, wpe;
    std::shared_ptr<nn::Dropout> drop;
    std::shared_ptr<nn::ModuleList<Block>> h;
    std::shared_ptr<nn::LayerNorm> ln_f;
    Transformer(const ModelConfig& c, std::shared_ptr<Rng> drop_rng);
  };
  std::shared_ptr<Transformer> transformer_;
};

}  // namespace artel::models
