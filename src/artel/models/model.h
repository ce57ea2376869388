// Model: what the training loop trains — a Module whose forward maps one
// batch input to logits — and make_model, which builds one of the bundled
// models from a validated config. Every weight is drawn from Rng(seed, 0), so
// a seed fixes the initial model on every rank; dropout masks come from a
// separate stream, Rng(seed, 1), whose state a checkpoint can save.
//
//   ModelConfig cfg;                      // W2's GPT by default
//   cfg.kind = "mlp";
//   std::unique_ptr<Model> m = make_model(cfg);
//   Variable logits = m->forward(x);      // (B, 784) f32 -> (B, 10)
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "artel/core/rng.h"
#include "artel/nn/module.h"

namespace artel::models {

using autograd::Variable;

struct ModelConfig {
  std::string kind = "gpt";  // "gpt" | "mlp" | "cnn"
  // GPT sizes (ignored by mlp and cnn); defaults are W2's baby GPT.
  int64_t vocab_size = 65;   // > 0
  int64_t n_layer = 4;       // > 0
  int64_t n_head = 4;        // > 0, divides n_embd
  int64_t n_embd = 128;      // > 0
  int64_t block_size = 64;   // > 0, longest sequence
  float dropout = 0.0f;      // in [0, 1)
  uint64_t seed = 1337;

  // Throws artel::Error naming the bad field and the fix.
  void validate() const;
};

class Model : public nn::Module {
 public:
  explicit Model(const ModelConfig& config);
  // The model's input (see each model) -> logits, with the graph recorded.
  virtual Variable forward(const Tensor& input) = 0;

  const ModelConfig& config() const { return config_; }
  // The dropout stream (save / restore its state() to resume bit-for-bit).
  Rng& dropout_rng() { return *dropout_rng_; }

 protected:
  const std::shared_ptr<Rng>& shared_dropout_rng() const { return dropout_rng_; }

 private:
  ModelConfig config_;
  std::shared_ptr<Rng> dropout_rng_;
};

// Stream numbers of the model's generators.
constexpr uint64_t kInitStream = 0;
constexpr uint64_t kDropoutStream = 1;

// Validates `config` and builds the model it names.
std::unique_ptr<Model> make_model(const ModelConfig& config);

}  // namespace artel::models
