#include "artel/parallel/gpt_tensor_parallel_block.h"

#include "artel/autograd/ops.h"
#include "artel/core/error.h"

namespace artel::parallel {

TensorParallelAttention::TensorParallelAttention(int64_t n_embd, int64_t n_head, float dropout,
                                                 comm::ProcessGroup& group, std::shared_ptr<Rng> drop)
    : local_heads_(n_head / group.size()) {
  if (n_head % group.size() != 0)
    throw Error(detail::concat("tensor parallelism: ", n_head, " attention heads do not split over ", group.size(),
                               " ranks"),
                "choose --tp dividing --n-head");
  c_attn_ = register_module("c_attn", std::make_shared<ColumnParallelLinear>(n_embd, 3 * n_embd, true, group));
  c_proj_ = register_module("c_proj", std::make_shared<RowParallelLinear>(n_embd, n_embd, true, group));
  resid_dropout_ = register_module("resid_dropout", std::make_shared<nn::Dropout>(dropout, std::move(drop)));
}

Variable TensorParallelAttention::forward(const Variable& x) {
  Variable qkv = c_attn_->forward(x);                                // (B, T, 3C/T): this rank's q | k | v
  Variable y = autograd::causal_self_attention(qkv, local_heads_);  // (B, T, C/T)
  return resid_dropout_->forward(c_proj_->forward(y));
}

TensorParallelMlp::TensorParallelMlp(int64_t n_embd, float dropout, comm::ProcessGroup& group,
                                     std::shared_ptr<Rng> drop) {
  c_fc_ = register_module("c_fc", std::make_shared<ColumnParallelLinear>(n_embd, 4 * n_embd, true, group));
  gelu_ = register_module("gelu", std::make_shared<nn::GELU>());
  c_proj_ = register_module("c_proj", std::make_shared<RowParallelLinear>(4 * n_embd, n_embd, true, group));
  dropout_ = register_module("dropout", std::make_shared<nn::Dropout>(dropout, std::move(drop)));
}

Variable TensorParallelMlp::forward(const Variable& x) {
  return dropout_->forward(c_proj_->forward(gelu_->forward(c_fc_->forward(x))));
}

TensorParallelBlock::TensorParallelBlock(int64_t n_embd, int64_t n_head, float dropout, comm::ProcessGroup& group,
                                         std::shared_ptr<Rng> drop) {
  ln_1_ = register_module("ln_1", std::make_shared<nn::LayerNorm>(n_embd));
  attn_ = register_module("attn", std::make_shared<TensorParallelAttention>(n_embd, n_head, dropout, group, drop));
  ln_2_ = register_module("ln_2", std::make_shared<nn::LayerNorm>(n_embd));
  mlp_ = register_module("mlp", std::make_shared<TensorParallelMlp>(n_embd, dropout, group, drop));
}

Variable TensorParallelBlock::forward(const Variable& x) {
  Variable h = autograd::add(x, attn_->forward(ln_1_->forward(x)));
  return autograd::add(h, mlp_->forward(ln_2_->forward(h)));
}

}  // namespace artel::parallel
