// A GPT block (models/gpt_block.h) whose matrices are split over a
// tensor-parallel group of T ranks, as Megatron-LM splits them:
//
//   attn: c_attn column-parallel (each rank computes q, k, v of n_head/T heads),
//         attention on those heads, c_proj row-parallel (one all-reduce)
//   mlp:  c_fc column-parallel, GELU on the local 4C/T features,
//         c_proj row-parallel (one all-reduce)
//
// so a forward costs two all-reduces of (B, T, C) per block, and a backward
// two more (in the copy_to_tensor_parallel ops in front of each c_attn and
// c_fc). LayerNorms and the row-parallel biases are replicated; their
// gradients come out identical on every rank. Member names are nanoGPT's, so
// the parameters have the whole model's names (gpt_sharding.h says which part
// of each one a rank holds).
//
//   TensorParallelBlock b(C, n_head, 0.0f, tp_group, drop_rng);
//   Variable y = b.forward(x);    // x (B, T, C), the same on every rank of tp_group
#pragma once

#include <memory>

#include "artel/comm/process_group.h"
#include "artel/core/rng.h"
#include "artel/nn/activations.h"
#include "artel/nn/dropout.h"
#include "artel/nn/layer_norm.h"
#include "artel/parallel/tensor_parallel_layers.h"

namespace artel::parallel {

class TensorParallelAttention : public nn::Layer {
 public:
  TensorParallelAttention(int64_t n_embd, int64_t n_head, float dropout, comm::ProcessGroup& group,
                          std::shared_ptr<Rng> drop);
  Variable forward(const Variable& x) override;  // (B, T, C) -> (B, T, C)

 private:
  int64_t local_heads_;
  std::shared_ptr<ColumnParallelLinear> c_attn_;
  std::shared_ptr<RowParallelLinear> c_proj_;
  std::shared_ptr<nn::Dropout> resid_dropout_;
};

class TensorParallelMlp : public nn::Layer {
 public:
  TensorParallelMlp(int64_t n_embd, float dropout, comm::ProcessGroup& group, std::shared_ptr<Rng> drop);
  Variable forward(const Variable& x) override;  // (B, T, C) -> (B, T, 4C/T) -> (B, T, C)

 private:
  std::shared_ptr<ColumnParallelLinear> c_fc_;
  std::shared_ptr<nn::GELU> gelu_;
  std::shared_ptr<RowParallelLinear> c_proj_;
  std::shared_ptr<nn::Dropout> dropout_;
};

class TensorParallelBlock : public nn::Layer {
 public:
  // Throws Error unless n_head is a multiple of the group's size.
  TensorParallelBlock(int64_t n_embd, int64_t n_head, float dropout, comm::ProcessGroup& group,
                      std::shared_ptr<Rng> drop);
  Variable forward(const Variable& x) override;

 private:
  std::shared_ptr<nn::LayerNorm> ln_1_, ln_2_;
  std::shared_ptr<TensorParallelAttention> attn_;
  std::shared_ptr<TensorParallelMlp> mlp_;
};

}  // namespace artel::parallel
