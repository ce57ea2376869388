// The pieces of a nanoGPT transformer block, with nanoGPT's member names so
// parameters come out as `h.{i}.ln_1.weight`, `h.{i}.attn.c_attn.weight`, ...
//
//   x = x + attn(ln_1(x))        // (B, T, C)
//   x = x + mlp(ln_2(x))
//
// Each residual add is done inside the branch's c_proj (Linear::forward_onto,
// autograd::linear_add) whenever that branch's dropout is inactive, instead
// of as a pass of its own.
//
// The block is written once for every layout: the GPT's plan (gpt.h) splits
// c_attn and c_fc by output features and both c_proj by input features over a
// tensor-parallel group, and the same code then runs on this rank's heads and
// 4C/T hidden features (attention takes its head count from c_attn's output).
//
// Dropout sits where nanoGPT puts it on the residual branches (attn.resid_dropout,
// mlp.dropout); the dropout on attention probabilities (nanoGPT's attn_dropout)
// is omitted, because the fused attention kernel never materialises them.
#pragma once

#include <memory>
#include <string>

#include "artel/core/rng.h"
#include "artel/nn/activations.h"
#include "artel/nn/dropout.h"
#include "artel/nn/layer_norm.h"
#include "artel/nn/linear.h"

namespace artel::models {

using autograd::Variable;

// How a block's parameters start (nanoGPT): weights N(0, 0.02), the
// residual projections N(0, 0.02/√(2·n_layer)), biases zero.
struct BlockInit {
  float std = 0.02f;
  float residual_std = 0.02f;
};

// The positions 0 … T−1 of a batch of token ids (B, T), int64 or int32, for
// the position embedding of a GPT-shaped model. Throws, naming `model`, on
// another shape or dtype, or T above block_size.
Tensor token_positions(const Tensor& ids, const std::string& model, int64_t block_size);

class CausalSelfAttention : public nn::Layer {
 public:
  CausalSelfAttention(int64_t n_embd, int64_t n_head, float dropout, const BlockInit& init, std::shared_ptr<Rng> drop);
  Variable forward(const Variable& x) override;  // (B, T, C) -> (B, T, C)
  // residual + forward(x), the residual added inside c_proj's GEMM when dropout is inactive.
  Variable forward_onto(const Variable& residual, const Variable& x);
  // Selective recomputation: the attention core (softmax and attention over
  // V) keeps only its input and runs again during backward, instead of
  // keeping its (B, heads, T, T) probabilities.
  void set_recompute_core(bool on) { recompute_core_ = on; }

 private:
  Variable heads(const Variable& x);  // c_attn and attention: (B, T, C) -> (B, T, C), before c_proj
  int64_t head_dim_;
  bool recompute_core_ = false;
  std::shared_ptr<nn::Linear> c_attn_, c_proj_;
  std::shared_ptr<nn::Dropout> resid_dropout_;
};

class GptMlp : public nn::Layer {
 public:
  GptMlp(int64_t n_embd, float dropout, const BlockInit& init, std::shared_ptr<Rng> drop,
         nn::Gelu gelu = nn::Gelu::exact);
  Variable forward(const Variable& x) override;  // (B, T, C) -> (B, T, 4C) -> (B, T, C)
  // residual + forward(x), the residual added inside c_proj's GEMM when dropout is inactive.
  Variable forward_onto(const Variable& residual, const Variable& x);

 private:
  std::shared_ptr<nn::Linear> c_fc_, c_proj_;
  std::shared_ptr<nn::GELU> gelu_;
  std::shared_ptr<nn::Dropout> dropout_;
};

class Block : public nn::Layer {
 public:
  Block(int64_t n_embd, int64_t n_head, float dropout, const BlockInit& init, std::shared_ptr<Rng> drop,
        nn::Gelu gelu = nn::Gelu::exact);
  Variable forward(const Variable& x) override;

 private:
  std::shared_ptr<nn::LayerNorm> ln_1_, ln_2_;
  std::shared_ptr<CausalSelfAttention> attn_;
  std::shared_ptr<GptMlp> mlp_;
};

}  // namespace artel::models
