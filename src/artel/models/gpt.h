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
//   Gpt gpt(ModelConfig{});                       // W2's baby GPT
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
  Variable forward(const Tensor& ids) override;

  // Samples max_new_tokens tokens after `prompt` (ids in [0, vocab_size),
  // non-empty): each step feeds the last block_size tokens, divides the last
  // logits by `temperature` (> 0), keeps the top_k largest (0 = all) and draws
  // from the softmax with `rng`. Runs in eval mode with no graph; returns
  // prompt + new tokens.
  std::vector<int64_t> generate(const std::vector<int64_t>& prompt, int64_t max_new_tokens, float temperature,
                                int64_t top_k, Rng& rng);

 private:
  void init_weights(Rng& rng);

  struct Transformer : nn::Module {
    std::shared_ptr<nn::Embedding> wte, wpe;
    std::shared_ptr<nn::Dropout> drop;
    std::shared_ptr<nn::ModuleList<Block>> h;
    std::shared_ptr<nn::LayerNorm> ln_f;
    Transformer(const ModelConfig& c, Rng& init, std::shared_ptr<Rng> drop_rng);
  };
  std::shared_ptr<Transformer> transformer_;
};

}  // namespace artel::models
