// Autoregressive sampling from any language model, given how to get the
// next token's logits: a whole model's forward (Gpt::generate) or a sharded
// model's forward through its pipeline and tensor-parallel ranks
// (train::Strategy::next_token_logits), so generation never needs the whole
// model on one worker.
//
//   std::vector<int64_t> ids = generate({0}, 100, {.temperature = 0.8f, .context = 64, .vocab = 65}, rng,
//                                       [&](const Tensor& ids) { return last_row_of(model.forward(ids)); });
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "artel/core/rng.h"
#include "artel/core/tensor.h"

namespace artel::models {

// The stream of the sampler's generator, Rng(seed, kSampleStream): apart
// from the weights' (their names') and dropout's (kDropoutStream), so the
// sample after `artel train` and `artel generate RUN` draw alike.
constexpr uint64_t kSampleStream = 2;

struct SamplingOptions {
  float temperature = 1.0f;  // > 0: the logits are divided by it
  int64_t top_k = 0;         // keep the top_k largest logits (0 = all)
  int64_t context = 0;       // tokens fed at most (a GPT's block_size)
  int64_t vocab = 0;         // entries of a logits row
};

// ids (1, T) int64 -> the logits of position T - 1 (`vocab` floats).
using NextTokenLogits = std::function<std::vector<float>(const Tensor& ids)>;

// Samples max_new_tokens tokens after `prompt` (ids in [0, vocab), non-empty):
// each step feeds the last `context` tokens, divides the last logits by the
// temperature, keeps the top_k largest and draws from the softmax with
// `rng`. Returns prompt + new tokens; throws naming a bad argument.
std::vector<int64_t> generate(const std::vector<int64_t>& prompt, int64_t max_new_tokens, const SamplingOptions& opts,
                              Rng& rng, const NextTokenLogits& next);

}  // namespace artel::models
