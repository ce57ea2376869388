// GPT counts: parameters against the known GPT-2 figures and against
// artel's own GPT built from the same dimensions; FLOPs against the formula
// Narayanan et al. 2021 use to report throughput.
#include "artel/plan/transformer_shape.h"

#include <gtest/gtest.h>

#include "artel/core/error.h"
#include "artel/models/gpt.h"

namespace artel::plan {
namespace {

TEST(TransformerShape, Gpt2HasTheKnownParameterCount) {
  // Hugging Face's GPT-2 (50,257 rows): 124,439,808; nanoGPT's padded 50,304: 124,475,904.
  EXPECT_DOUBLE_EQ(total_parameters({12, 12, 768, 1024, 50257}), 124439808.0);
  EXPECT_DOUBLE_EQ(total_parameters({12, 12, 768, 1024, 50304}), 124475904.0);
}

TEST(TransformerShape, ParameterCountIsArtelsOwnGpts) {
  models::ModelConfig c;
  c.vocab_size = 96;
  c.n_layer = 3;
  c.n_head = 4;
  c.n_embd = 32;
  c.block_size = 16;
  models::Gpt gpt(c);
  EXPECT_DOUBLE_EQ(total_parameters({3, 4, 32, 16, 96}), static_cast<double>(gpt.num_parameters()));
}

TEST(TransformerShape, FlopsAddUpToNarayanansFormula) {
  // With full recomputation a block runs forward twice and backward (2x) once,
  // the output layer forward and backward only: 4·L·block + 3·logits.
  const TransformerShape s{96, 96, 12288, 2048, 51200};
  const double batch = 8;
  const double ours = 4 * s.n_layer * block_forward_flops(s, batch) + 3 * logits_forward_flops(s, batch);
  EXPECT_NEAR(ours / narayanan_iteration_flops(s, batch), 1.0, 1e-12);
  // 24·s·h² + 4·s²·h per sequence and block.
  const TransformerShape g{12, 12, 768, 1024, 50304};
  EXPECT_DOUBLE_EQ(block_forward_flops(g, 1), 24.0 * 1024 * 768 * 768 + 4.0 * 1024 * 1024 * 768);
}

TEST(TransformerShape, RefusesBadDimensions) {
  EXPECT_THROW((TransformerShape{12, 5, 768, 1024, 50304}.validate()), Error);  // 5 does not divide 768
  EXPECT_THROW((TransformerShape{0, 12, 768, 1024, 50304}.validate()), Error);
}

}  // namespace
}  // namespace artel::plan
