// The artel half of the Hugging Face GPT-2 test: loads a GPT-2 in Hugging
// Face's layout (models/hf_gpt2.h) into artel's GPT, writes its logits for
// the given ids, and writes the weights back in that layout (the round trip).
//
//   hf_gpt2_dump MODEL.safetensors IDS.safetensors LOGITS.safetensors ROUNDTRIP.safetensors
// IDS holds "ids" (B, T) int64 and, in its metadata, the model's n_layer,
// n_head, n_embd, block_size, vocab_size and gelu (exact | tanh).
#include <cstdio>
#include <string>

#include "artel/autograd/ops.h"
#include "artel/core/error.h"
#include "artel/models/hf_gpt2.h"
#include "artel/models/model.h"
#include "artel/nn/safetensors.h"

int main(int argc, char** argv) try {
  using namespace artel;
  if (argc != 5) {
    std::fprintf(stderr, "usage: hf_gpt2_dump MODEL IDS LOGITS ROUNDTRIP\n");
    return 2;
  }
  nn::SafetensorsFile in = nn::read_safetensors(argv[2]);
  models::ModelConfig c;
  c.kind = "gpt";
  c.n_layer = std::stoll(in.metadata.at("n_layer"));
  c.n_head = std::stoll(in.metadata.at("n_head"));
  c.n_embd = std::stoll(in.metadata.at("n_embd"));
  c.block_size = std::stoll(in.metadata.at("block_size"));
  c.vocab_size = std::stoll(in.metadata.at("vocab_size"));
  c.gelu = in.metadata.at("gelu");
  ARTEL_CHECK(models::is_hf_gpt2(argv[1]), argv[1], " is not in Hugging Face's layout");
  std::unique_ptr<models::Model> gpt = models::declare_model(c);
  models::load_hf_gpt2(*gpt, argv[1]);
  autograd::NoGradGuard no_grad;
  gpt->eval();
  nn::write_safetensors(argv[3], {{"logits", gpt->forward(in.tensors.at("ids")).value()}});
  std::vector<std::pair<std::string, Tensor>> weights;
  for (const auto& [name, p] : gpt->named_parameters()) weights.emplace_back(name, p.value());
  models::write_hf_gpt2(weights, argv[4]);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "hf_gpt2_dump: %s\n", e.what());
  return 1;
}
