// The bundled models (GPT, word-level LM, MLP, CNN): nn::Models with a config, each
// declaring its plan next to it, and make_model, which builds one from a
// validated config. The seed fixes every weight on every rank (each
// parameter drawn from its own stream, Note [Declared parameters] in
// nn/module.h); dropout masks come from the stream Rng(seed, 1), whose state
// a checkpoint can save.
//
//   ModelConfig cfg;                      // W2's GPT by default
//   cfg.kind = "mlp";
//   std::unique_ptr<Model> m = make_model(cfg);        // drawn from cfg.seed
//   Variable logits = m->forward(x);      // (B, 784) f32 -> (B, 10)
//   std::unique_ptr<Model> d = declare_model(cfg);     // shapes only: a worker materialises its shard
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "artel/core/rng.h"
#include "artel/nn/model.h"

namespace artel::models {

using autograd::Variable;

struct ModelConfig {
  std::string kind = "gpt";  // "gpt" | "wordlm" | "mlp" | "cnn"
  // GPT and word-LM sizes (ignored by mlp and cnn); defaults are W2's baby GPT.
  int64_t vocab_size = 65;   // > 0
  int64_t n_layer = 4;       // > 0
  int64_t n_head = 4;        // > 0, divides n_embd
  int64_t n_embd = 128;      // > 0
  int64_t block_size = 64;   // > 0, longest sequence
  float dropout = 0.0f;      // in [0, 1)
  std::string gelu = "exact";  // the MLP's GELU: exact (nanoGPT's) | tanh (GPT-2's gelu_new)
  uint64_t seed = 1337;

  // Throws artel::Error naming the bad field and the fix.
  void validate() const;
};

class Model : public nn::Model {
 public:
  explicit Model(const ModelConfig& config);

  const ModelConfig& config() const { return config_; }
  // The dropout stream (save / restore its state() to resume bit-for-bit).
  Rng* dropout_rng() override { return dropout_rng_.get(); }
  // selective: every attention block's core is recomputed (gpt_block.h), the
  // GPT's and the word LM's alike; the MLP and the CNN have none.
  void set_recompute(nn::Recompute mode) override;

 protected:
  const std::shared_ptr<Rng>& shared_dropout_rng() const { return dropout_rng_; }

 private:
  ModelConfig config_;
  std::shared_ptr<Rng> dropout_rng_;
};

// gpt and wordlm train on text; mlp and cnn on MNIST.
bool trains_on_text(const std::string& kind);

// The stream of the dropout generator (parameters draw from streams of their names).
constexpr uint64_t kDropoutStream = 1;

// Validates `config` and builds the model it names, declared only (no
// parameter has storage yet).
std::unique_ptr<Model> declare_model(const ModelConfig& config);
// declare_model, then every parameter drawn from config.seed.
std::unique_ptr<Model> make_model(const ModelConfig& config);

}  // namespace artel::models
