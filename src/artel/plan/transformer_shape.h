// TransformerShape: the dimensions of a GPT (nanoGPT's and Megatron's block:
// pre-norm attention and a 4h MLP, biases, learned positions, the output
// layer tied to the token embedding), and what follows from them alone —
// parameter counts and matrix-product FLOPs. The planner's cost of a layer
// under a layout (tensor parallelism, recomputation) is built on these in
// stage_work.h; here nothing depends on how the model is split.
//
//   TransformerShape gpt2{.n_layer = 12, .n_head = 12, .n_embd = 768, .seq = 1024, .vocab = 50304};
//   total_parameters(gpt2);                        // 124,475,904
//   block_forward_flops(gpt2, /*sequences=*/1);    // 24·s·h² + 4·s²·h
#pragma once

#include <cstdint>

namespace artel::plan {

struct TransformerShape {
  int64_t n_layer = 0;  // L: transformer blocks
  int64_t n_head = 0;   // a: attention heads, divides n_embd
  int64_t n_embd = 0;   // h: model width
  int64_t seq = 0;      // s: tokens per sequence (the block size)
  int64_t vocab = 0;    // V: rows of the (tied) token embedding, padding included

  // Throws Error naming the first dimension out of range.
  void validate() const;
};

// One block: ln_1 (2h), c_attn (3h² + 3h), attn.c_proj (h² + h), ln_2 (2h),
// c_fc (4h² + 4h), mlp.c_proj (4h² + h) = 12h² + 13h.
double block_parameters(const TransformerShape& shape);
// wte (V·h) + wpe (s·h).
double embedding_parameters(const TransformerShape& shape);
// ln_f (2h); the output layer is wte itself.
double head_parameters(const TransformerShape& shape);
// Every parameter once: embedding + L blocks + head.
double total_parameters(const TransformerShape& shape);

// Matrix-product FLOPs of one block's forward over `sequences` sequences of
// s tokens (a multiply-add counts 2): the four weight products
// 2·(3h² + h² + 4h² + 4h²)·s = 24·s·h² per sequence, and the attention
// products Q·Kᵀ and P·V, 2·2·s²·h. Backward costs twice this.
double block_forward_flops(const TransformerShape& shape, double sequences);
// The attention products alone (4·s²·h per sequence): what selective
// recomputation runs again in backward.
double attention_core_forward_flops(const TransformerShape& shape, double sequences);
// The output layer's product, logits = x·wteᵀ: 2·s·h·V per sequence.
double logits_forward_flops(const TransformerShape& shape, double sequences);

// Narayanan et al. 2021 (arXiv 2104.04473, eq. 3): the FLOPs of one training
// iteration of `batch` sequences with full recomputation, as that paper (and
// Megatron's logs) count them to report teraFLOP/s per GPU:
// 96·B·s·L·h²·(1 + s/(6h) + V/(16·L·h)).
double narayanan_iteration_flops(const TransformerShape& shape, double batch);

}  // namespace artel::plan
