#include "artel/models/model.h"

#include "artel/models/cnn.h"
#include "artel/models/gpt.h"
#include "artel/models/gpt_block.h"
#include "artel/models/mlp.h"
#include "artel/models/word_lm.h"
#include "artel/nn/activations.h"

namespace artel::models {

void ModelConfig::validate() const {
  ARTEL_CHECK(kind == "gpt" || kind == "wordlm" || kind == "mlp" || kind == "cnn", "unknown model '", kind,
              "' (hint: choose gpt, wordlm, mlp or cnn)");
  if (!trains_on_text(kind)) return;
  auto positive = [](int64_t v, const char* name) {
    ARTEL_CHECK(v > 0, "model: ", name, " must be positive, got ", v);
  };
  positive(vocab_size, "vocab_size");
  positive(n_layer, "n_layer");
  positive(n_head, "n_head");
  positive(n_embd, "n_embd");
  positive(block_size, "block_size");
  ARTEL_CHECK(n_embd % n_head == 0, "model: n_embd ", n_embd, " is not divisible by n_head ", n_head,
              " (hint: pick n_head dividing n_embd, e.g. n_embd 128 with n_head 4)");
  ARTEL_CHECK(dropout >= 0.0f && dropout < 1.0f, "model: dropout must be in [0, 1), got ", dropout);
  nn::parse_gelu(gelu);
}

void Model::set_recompute(nn::Recompute mode) {
  nn::Model::set_recompute(mode);
  for (auto& [path, m] : named_modules())
    if (auto* attn = dynamic_cast<CausalSelfAttention*>(m)) attn->set_recompute_core(mode == nn::Recompute::selective);
}

bool trains_on_text(const std::string& kind) { return kind == "gpt" || kind == "wordlm"; }

Model::Model(const ModelConfig& config)
    : config_(config), dropout_rng_(std::make_shared<Rng>(config.seed, kDropoutStream)) {
  config_.validate();
}

std::unique_ptr<Model> declare_model(const ModelConfig& config) {
  config.validate();
  if (config.kind == "mlp") return std::make_unique<Mlp>(config);
  if (config.kind == "cnn") return std::make_unique<Cnn>(config);
  if (config.kind == "wordlm") return std::make_unique<WordLm>(config);
  return std::make_unique<Gpt>(config);
}

std::unique_ptr<Model> make_model(const ModelConfig& config) {
  std::unique_ptr<Model> m = declare_model(config);
  nn::materialize(*m, config.seed);
  return m;
}

}  // namespace artel::models
