#include "artel/models/gpt_block.h"

#include "artel/autograd/checkpoint.h"
#include "artel/autograd/ops.h"

namespace artel::models {

Tensor token_positions(const Tensor& ids, const std::string& model, int64_t block_size) {
  ARTEL_CHECK((ids.dtype() == DType::i64 || ids.dtype() == DType::i32) && ids.dim() == 2 && ids.size(0) > 0 &&
                  ids.size(1) > 0,
              model, ": input must be int64 or int32 token ids (B, T), got ", dtype_name(ids.dtype()), " ",
              shape_str(ids.shape()));
  const int64_t T = ids.size(1);
  ARTEL_CHECK(T <= block_size, model, ": sequence length ", T, " exceeds block_size ", block_size,
              " (hint: crop the input or build the model with a larger --block-size)");
  Tensor pos = Tensor::empty({T}, DType::i64);
  for (int64_t t = 0; t < T; ++t) pos.data<int64_t>()[t] = t;
  return pos;
}
namespace {

// residual + drop(proj(h)). With the dropout inactive (p = 0, or eval) that is
// one linear_add: the residual goes into the GEMM's output with the bias
// instead of costing an add of its own. Same parameters either way.
Variable project_onto(const Variable& residual, nn::Linear& proj, nn::Dropout& drop, const Variable& h) {
  if (drop.p() == 0.0f || !drop.is_training()) return proj.forward_onto(residual, h);
  return autograd::add(residual, drop.forward(proj.forward(h)));
}

nn::Init weights(float std) { return nn::Init::normal(0.0f, std); }

}  // namespace

CausalSelfAttention::CausalSelfAttention(int64_t n_embd, int64_t n_head, float dropout, const BlockInit& init,
                                         std::shared_ptr<Rng> drop)
    : head_dim_(n_embd / n_head) {
  c_attn_ = register_module("c_attn", std::make_shared<nn::Linear>(n_embd, 3 * n_embd, true, weights(init.std),
                                                                    nn::Init::zeros()));
  c_proj_ = register_module("c_proj", std::make_shared<nn::Linear>(n_embd, n_embd, true, weights(init.residual_std),
                                                                    nn::Init::zeros()));
  resid_dropout_ = register_module("resid_dropout", std::make_shared<nn::Dropout>(dropout, std::move(drop)));
}

Variable CausalSelfAttention::forward(const Variable& x) {
  return resid_dropout_->forward(c_proj_->forward(heads(x)));
}

Variable CausalSelfAttention::forward_onto(const Variable& residual, const Variable& x) {
  return project_onto(residual, *c_proj_, *resid_dropout_, heads(x));
}

// The heads are whatever c_attn produced: all of them on one worker, this
// rank's n_head/T under tensor parallelism.
Variable CausalSelfAttention::heads(const Variable& x) {
  Variable qkv = c_attn_->forward(x);  // (B, T, 3·heads·D)
  const int64_t heads = qkv.size(-1) / (3 * head_dim_);
  auto core = [heads](const Variable& q) { return autograd::causal_self_attention(q, heads); };  // (B, T, heads·D)
  return recompute_core_ ? autograd::checkpoint(core, qkv) : core(qkv);
}

GptMlp::GptMlp(int64_t n_embd, float dropout, const BlockInit& init, std::shared_ptr<Rng> drop, nn::Gelu gelu) {
  c_fc_ = register_module("c_fc", std::make_shared<nn::Linear>(n_embd, 4 * n_embd, true, weights(init.std),
                                                                nn::Init::zeros()));
  gelu_ = register_module("gelu", std::make_shared<nn::GELU>(gelu));
  c_proj_ = register_module("c_proj", std::make_shared<nn::Linear>(4 * n_embd, n_embd, true,
                                                                    weights(init.residual_std), nn::Init::zeros()));
  dropout_ = register_module("dropout", std::make_shared<nn::Dropout>(dropout, std::move(drop)));
}

Variable GptMlp::forward(const Variable& x) {
  return dropout_->forward(c_proj_->forward(gelu_->after(*c_fc_, x)));
}

Variable GptMlp::forward_onto(const Variable& residual, const Variable& x) {
  return project_onto(residual, *c_proj_, *dropout_, gelu_->after(*c_fc_, x));
}

Block::Block(int64_t n_embd, int64_t n_head, float dropout, const BlockInit& init, std::shared_ptr<Rng> drop,
             nn::Gelu gelu) {
  ln_1_ = register_module("ln_1", std::make_shared<nn::LayerNorm>(n_embd));
  attn_ = register_module("attn", std::make_shared<CausalSelfAttention>(n_embd, n_head, dropout, init, drop));
  ln_2_ = register_module("ln_2", std::make_shared<nn::LayerNorm>(n_embd));
  mlp_ = register_module("mlp", std::make_shared<GptMlp>(n_embd, dropout, init, drop, gelu));
}

Variable Block::forward(const Variable& x) {
  Variable h = attn_->forward_onto(x, ln_1_->forward(x));  // x + attn(ln_1(x))
  return mlp_->forward_onto(h, ln_2_->forward(h));         // h + mlp(ln_2(h))
}

}  // namespace artel::models
