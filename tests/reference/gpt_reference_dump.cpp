// The artel half of the GPT reference test (llm.c's test_gpt2.c, the other
// way round): builds GPTs through the public API, runs one forward and
// backward on a fixed batch, and writes, per case, into DIR:
//   <case>.weights.safetensors   the weights, as save_weights writes them (init.safetensors' format)
//   <case>.outputs.safetensors   ids, targets (B, T) i64; logits (B, T, V); loss (); grad/<name> for
//                                every parameter; the case's config in the metadata
// gpt_reference_test.py then runs tools/torch/gpt.py on the same weights and
// batch and compares.
//
//   gpt_reference_dump DIR
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "artel/autograd/ops.h"
#include "artel/core/error.h"
#include "artel/core/threads.h"
#include "artel/kernels/gemm.h"
#include "artel/models/model.h"
#include "artel/nn/init.h"
#include "artel/nn/safetensors.h"

namespace {

using artel::Rng;
using artel::Tensor;
using artel::models::ModelConfig;

struct Case {
  std::string name;
  ModelConfig model;
  int64_t batch = 4, time = 16;
  bool redraw = true;            // false: artel's own init (what training starts from)
  std::string gemm = "onednn";   // the GEMM library behind every product
};

ModelConfig gpt(int64_t n_layer, int64_t n_head, int64_t n_embd, int64_t block_size, uint64_t seed) {
  ModelConfig c;
  c.kind = "gpt";
  c.vocab_size = 65;
  c.n_layer = n_layer, c.n_head = n_head, c.n_embd = n_embd, c.block_size = block_size;
  c.seed = seed;
  return c;
}

// The cases: a tiny GPT at T = block_size and below it (T = 11: the attention
// kernel's padded rows), and W2's shape (4 layers, 4 heads, 128 wide, block
// 64: several 16-query tiles) at T = 64 and T = 45, on each GEMM library,
// plus W2 at artel's own init.
std::vector<Case> cases() {
  return {
      {.name = "tiny", .model = gpt(2, 2, 32, 16, 1), .batch = 4, .time = 16},
      {.name = "tiny_short", .model = gpt(2, 2, 32, 16, 2), .batch = 4, .time = 11},
      {.name = "w2", .model = gpt(4, 4, 128, 64, 3), .batch = 4, .time = 64},
      {.name = "w2_short", .model = gpt(4, 4, 128, 64, 4), .batch = 3, .time = 45},
      {.name = "w2_openblas", .model = gpt(4, 4, 128, 64, 5), .batch = 4, .time = 64, .gemm = "openblas"},
      {.name = "w2_init", .model = gpt(4, 4, 128, 64, 6), .batch = 4, .time = 64, .redraw = false},
  };
}

// Redraws every parameter so that each one matters to the result: artel's
// init has zero biases and unit LayerNorm scales (a bug that dropped a bias
// or a scale would change nothing) and logits near zero (a nearly uniform
// softmax). Matrices N(0, 0.1), embeddings N(0, 0.2) (wte is also lm_head:
// logits of one or two units), biases N(0, 0.1), LayerNorm scales N(1, 0.2).
void redraw_weights(artel::models::Model& m, Rng& rng) {
  for (auto& [name, p] : m.named_parameters()) {
    Tensor& t = p.value();
    const bool embedding = name.find(".wte.") != std::string::npos || name.find(".wpe.") != std::string::npos;
    const bool layer_norm_scale = t.dim() == 1 && name.find(".ln_") != std::string::npos &&
                                  name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0;
    if (embedding) artel::nn::init::normal(t, 0.0f, 0.2f, rng);
    else if (t.dim() >= 2) artel::nn::init::normal(t, 0.0f, 0.1f, rng);
    else if (layer_norm_scale) artel::nn::init::normal(t, 1.0f, 0.2f, rng);
    else artel::nn::init::normal(t, 0.0f, 0.1f, rng);
  }
}

Tensor random_ids(int64_t batch, int64_t time, int64_t vocab, Rng& rng) {
  Tensor ids = Tensor::empty({batch, time}, artel::DType::i64);
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = static_cast<int64_t>(rng.below(vocab));
  return ids;
}

void dump(const Case& c, const std::filesystem::path& dir) {
  artel::kernels::set_gemm_library(artel::kernels::parse_gemm_library(c.gemm));
  std::unique_ptr<artel::models::Model> model = artel::models::make_model(c.model);
  Rng rng(c.model.seed, /*stream=*/7);
  if (c.redraw) redraw_weights(*model, rng);
  const ModelConfig& m = c.model;
  std::map<std::string, std::string> meta = {
      {"vocab_size", std::to_string(m.vocab_size)}, {"n_layer", std::to_string(m.n_layer)},
      {"n_head", std::to_string(m.n_head)},         {"n_embd", std::to_string(m.n_embd)},
      {"block_size", std::to_string(m.block_size)}, {"gemm", c.gemm},
      {"threads", std::to_string(artel::num_threads())}};
  artel::nn::save_weights(*model, (dir / (c.name + ".weights.safetensors")).string(), meta);

  Tensor ids = random_ids(c.batch, c.time, m.vocab_size, rng);      // (B, T)
  Tensor targets = random_ids(c.batch, c.time, m.vocab_size, rng);  // (B, T)
  artel::autograd::Variable logits = model->forward(ids);          // (B, T, V)
  artel::autograd::Variable loss = artel::autograd::cross_entropy(logits, targets.view({-1}));
  loss.backward();

  std::map<std::string, Tensor> out = {
      {"ids", ids}, {"targets", targets}, {"logits", logits.value()}, {"loss", loss.value()}};
  for (const auto& [name, p] : model->named_parameters()) {
    ARTEL_CHECK(p.grad().defined(), "reference dump: ", name, " got no gradient from backward");
    out["grad/" + name] = p.grad();
  }
  artel::nn::write_safetensors((dir / (c.name + ".outputs.safetensors")).string(), out, meta);
  std::printf("%-12s B %lld T %lld, %lld parameters, gemm %s, loss %.6f\n", c.name.c_str(),
              static_cast<long long>(c.batch), static_cast<long long>(c.time),
              static_cast<long long>(model->num_parameters()), c.gemm.c_str(), loss.item());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR   (writes <case>.{weights,outputs}.safetensors into DIR)\n", argv[0]);
    return 2;
  }
  try {
    std::filesystem::create_directories(argv[1]);
    artel::set_num_threads(2);  // the kernels' split paths run wherever the test does
    for (const Case& c : cases()) dump(c, argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpt_reference_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
