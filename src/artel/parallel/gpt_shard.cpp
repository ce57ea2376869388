#include "artel/parallel/gpt_shard.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "artel/autograd/ops.h"
#include "artel/core/error.h"
#include "artel/models/gpt_block.h"
#include "artel/nn/dropout.h"
#include "artel/nn/embedding.h"
#include "artel/nn/init.h"
#include "artel/nn/layer_norm.h"
#include "artel/parallel/gpt_tensor_parallel_block.h"
#include "artel/parallel/tensor_parallel.h"
#include "artel/parallel/tensor_parallel_layers.h"

namespace artel::parallel {
namespace {

Tensor random_normal(const Shape& shape, Rng& rng) {
  Tensor t = Tensor::empty(shape, DType::f32);
  nn::init::normal(t, 0.0f, 1.0f, rng);
  return t;
}

Tensor random_tokens(const Shape& shape, int64_t vocab, Rng& rng) {
  Tensor t = Tensor::empty(shape, DType::i64);
  int64_t* x = t.data<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i) x[i] = static_cast<int64_t>(rng.below(static_cast<uint64_t>(vocab)));
  return t;
}

// Fewest milliseconds of `repeats` calls of `run`, after one untimed call.
// The work is the same every call, so anything above the fastest is the
// machine (another process, a preempted thread), not the piece.
double fastest_ms(int repeats, const std::function<void()>& run) {
  run();
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < repeats; ++i) {
    auto start = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace

// Blocks named by their index in the whole model ("2", "3" on a stage
// holding blocks [2, 4)), so parameter names match the single-worker ones.
struct BlockStack : nn::Module {
  std::vector<std::shared_ptr<nn::Layer>> blocks;
  void add(int64_t index, std::shared_ptr<nn::Layer> block) {
    blocks.push_back(register_module(std::to_string(index), std::move(block)));
  }
};

struct GptShard::Trunk : nn::Module {
  std::shared_ptr<nn::Embedding> wte;                 // T = 1
  std::shared_ptr<VocabParallelEmbedding> wte_shard;  // T > 1
  std::shared_ptr<nn::Embedding> wpe;
  std::shared_ptr<nn::Dropout> drop;
  std::shared_ptr<BlockStack> h;
  std::shared_ptr<nn::LayerNorm> ln_f;

  Trunk(const models::ModelConfig& c, const ShardPlace& place, const std::shared_ptr<Rng>& drop_rng) {
    const bool first = place.stage == 0, last = place.stage == place.stages - 1;
    Rng unused(0);  // the shard's values come from load_from_full
    if (first || last) {
      if (!place.tp) wte = register_module("wte", std::make_shared<nn::Embedding>(c.vocab_size, c.n_embd, unused));
      else wte_shard = register_module("wte", std::make_shared<VocabParallelEmbedding>(c.vocab_size, c.n_embd, *place.tp));
    }
    if (first) {
      wpe = register_module("wpe", std::make_shared<nn::Embedding>(c.block_size, c.n_embd, unused));
      drop = register_module("drop", std::make_shared<nn::Dropout>(c.dropout, drop_rng));
    }
    h = register_module("h", std::make_shared<BlockStack>());
    for (int64_t i = place.blocks.first; i < place.blocks.last; ++i) {
      if (!place.tp) h->add(i, std::make_shared<models::Block>(c.n_embd, c.n_head, c.dropout, unused, drop_rng));
      else h->add(i, std::make_shared<TensorParallelBlock>(c.n_embd, c.n_head, c.dropout, *place.tp, drop_rng));
    }
    if (last) ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(c.n_embd));
  }

  // The local wte table (the whole one, or this rank's vocabulary rows).
  const Variable& wte_weight() const { return wte ? wte->weight() : wte_shard->weight(); }
};

GptShard::GptShard(const models::ModelConfig& cfg, const ShardPlace& place)
    : cfg_(cfg), place_(place), dropout_rng_(std::make_shared<Rng>(cfg.seed, models::kDropoutStream)) {
  ARTEL_CHECK(cfg.kind == "gpt", "GptShard built from a config of kind '", cfg.kind, "'");
  ARTEL_CHECK(place.stages >= 1 && place.stage >= 0 && place.stage < place.stages && place.blocks.first >= 0 &&
                  place.blocks.first < place.blocks.last && place.blocks.last <= cfg.n_layer,
              "GptShard: stage ", place.stage, " of ", place.stages, " with blocks [", place.blocks.first, ", ",
              place.blocks.last, ") of ", cfg.n_layer);
  if (place.tp && place.tp->size() == 1) place_.tp = nullptr;  // a group of one splits nothing
  if (cfg.vocab_size % tp_size() != 0)
    throw Error(detail::concat("tensor parallelism: the vocabulary of ", cfg.vocab_size, " tokens does not split over ",
                               tp_size(), " ranks"),
                "choose --tp dividing the vocabulary size");
  transformer_ = register_module("transformer", std::make_shared<Trunk>(cfg, place_, dropout_rng_));
}

Variable GptShard::embed(const Tensor& ids) {
  ARTEL_CHECK((ids.dtype() == DType::i64 || ids.dtype() == DType::i32) && ids.dim() == 2,
              "gpt stage 0: input must be token ids (B, T), got ", dtype_name(ids.dtype()), " ", shape_str(ids.shape()));
  const int64_t T = ids.size(1);
  ARTEL_CHECK(T <= cfg_.block_size, "gpt: sequence length ", T, " exceeds block_size ", cfg_.block_size);
  Tensor pos = Tensor::empty({T}, DType::i64);
  for (int64_t i = 0; i < T; ++i) pos.data<int64_t>()[i] = i;
  Variable tok = transformer_->wte ? transformer_->wte->forward(ids) : transformer_->wte_shard->forward(ids);
  return transformer_->drop->forward(autograd::add(tok, transformer_->wpe->forward(pos)));
}

Variable GptShard::head_loss(const Variable& x, const Tensor& targets) {
  Variable h = transformer_->ln_f->forward(x);
  const Tensor y = targets.view({-1});
  if (!place_.tp) return autograd::cross_entropy(autograd::linear(h, transformer_->wte_weight(), Variable()), y);
  Variable logits = autograd::linear(copy_to_tensor_parallel(h, *place_.tp), transformer_->wte_weight(), Variable());
  return vocab_parallel_cross_entropy(logits, y, transformer_->wte_shard->vocab_start(), *place_.tp);
}

Variable GptShard::forward(const Tensor& ids, const Variable& input, const Tensor& targets) {
  Variable x = first_stage() ? embed(ids) : input;
  ARTEL_CHECK(x.defined(), "gpt stage ", place_.stage, ": no input activation");
  for (const auto& block : transformer_->h->blocks) x = block->forward(x);
  return last_stage() ? head_loss(x, targets) : x;
}

void GptShard::load_from_full(const nn::StateDict& full) {
  for (auto& [name, p] : named_parameters()) {
    auto it = full.find(name);
    ARTEL_CHECK(it != full.end(), "loading a model shard: the whole model has no parameter ", name);
    Tensor part = take_shard(it->second, shard_kind(name), tp_rank(), tp_size());
    ARTEL_CHECK(part.shape() == p.value().shape(), "loading a model shard: ", name, " gives ", shape_str(part.shape()),
                ", the shard holds ", shape_str(p.value().shape()));
    p.value().copy_from(part);
  }
}

// measure_costs times the pieces one by one so that a pipeline can be cut by
// what its stages compute rather than by what they store. Each piece runs on
// inputs of the shape it sees in training; its backward is seeded with a
// fixed random gradient, so no op takes a shortcut for zeros.
PieceCosts GptShard::measure_costs(int64_t rows, int repeats) {
  ARTEL_CHECK(place_.stages == 1 && !place_.tp && place_.blocks.size() == cfg_.n_layer,
              "measuring stage costs needs a shard of the whole model, got stage ", place_.stage, " of ",
              place_.stages);
  ARTEL_CHECK(rows >= 1 && repeats >= 1, "measuring stage costs: ", rows, " rows, ", repeats, " repeats");
  const int64_t T = cfg_.block_size;
  const Shape hidden{rows, T, cfg_.n_embd};
  Rng rng(cfg_.seed, /*stream=*/0xC057);
  const Tensor ids = random_tokens({rows, T}, cfg_.vocab_size, rng);
  const Tensor targets = random_tokens({rows * T}, cfg_.vocab_size, rng);
  const Tensor seed_grad = random_normal(hidden, rng);
  const Variable input(random_normal(hidden, rng), /*requires_grad=*/true);
  nn::Layer& block = *transformer_->h->blocks.front();

  PieceCosts costs;
  costs.embeddings = fastest_ms(repeats, [&] { embed(ids).backward(seed_grad); });
  costs.block = fastest_ms(repeats, [&] { block.forward(input).backward(seed_grad); });
  costs.head = fastest_ms(repeats, [&] { head_loss(input, targets).backward(); });
  zero_grad();
  return costs;
}

}  // namespace artel::parallel
