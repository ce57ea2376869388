// WordLm: a word-level language model whose bulk is its input table — one
// row per distinct word (data/word_text.h), a sparse nn::Embedding, so a
// parameter server's workers move only the rows a batch reads. The rest is
// small and dense, as in PERSIA's and recommendation models (a large sparse
// embedding under a small dense network):
//   embed.weight (V, C) sparse, pos.weight (block_size, C),
//   h.{i}: GPT blocks (gpt_block.h), ln_f,
//   proj (C -> 32, no bias), out (32 -> V): the output layer factorised
//   through 32 features (Sak et al.'s projection layer), so that it is a
//   fraction of the input table and not its equal.
// Init as the GPT's. With tinyshakespeare's 14,565 words and C = 128: 1.86 M
// table parameters of 2.55 M.
//
//   WordLm lm(ModelConfig{.kind = "wordlm", .vocab_size = 14565, .n_layer = 1});
//   Variable logits = lm.forward(ids);   // ids (B, T) int64 -> (B, T, V)
#pragma once

#include "artel/models/gpt_block.h"
#include "artel/models/model.h"
#include "artel/nn/embedding.h"
#include "artel/nn/linear.h"
#include "artel/nn/sequential.h"

namespace artel::models {

class WordLm : public Model {
 public:
  static constexpr int64_t kHeadFeatures = 32;
  explicit WordLm(const ModelConfig& config);

 private:
  nn::Activations embed(const nn::Activations& ids);  // (B, T) -> (B, T, C)
  nn::Activations head(const nn::Activations& x);    // (B, T, C) -> (B, T, V)

  std::shared_ptr<nn::Embedding> embed_, pos_;
  std::shared_ptr<nn::Dropout> drop_;
  std::shared_ptr<nn::ModuleList<Block>> h_;
  std::shared_ptr<nn::LayerNorm> ln_f_;
  std::shared_ptr<nn::Linear> proj_, out_;
};

}  // namespace artel::models
