#include "artel/models/generate.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "artel/core/error.h"

namespace artel::models {
namespace {

// Index of a draw from softmax(logits) (entries of -inf never drawn).
int64_t sample(const std::vector<float>& logits, Rng& rng) {
  float top = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double total = 0;
  for (size_t i = 0; i < logits.size(); ++i) total += p[i] = std::exp(static_cast<double>(logits[i]) - top);
  double u = rng.uniform() * total;
  for (size_t i = 0; i < p.size(); ++i) {
    if (u < p[i]) return static_cast<int64_t>(i);
    u -= p[i];
  }
  for (size_t i = p.size(); i-- > 0;)  // rounding left u just above the last mass
    if (p[i] > 0) return static_cast<int64_t>(i);
  return 0;
}

}  // namespace

std::vector<int64_t> generate(const std::vector<int64_t>& prompt, int64_t max_new_tokens, const SamplingOptions& opts,
                              Rng& rng, const NextTokenLogits& next) {
  const float temperature = opts.temperature;
  ARTEL_CHECK(!prompt.empty(), "generate: the prompt needs at least one token");
  ARTEL_CHECK(max_new_tokens >= 0, "generate: max_new_tokens must be >= 0, got ", max_new_tokens);
  ARTEL_CHECK(temperature > 0 && std::isfinite(temperature), "generate: temperature must be a positive, finite float32, got ",
              temperature);
  ARTEL_CHECK(opts.top_k >= 0, "generate: top_k must be >= 0 (0 = all), got ", opts.top_k);
  ARTEL_CHECK(opts.context > 0 && opts.vocab > 0, "generate: context and vocab must be positive");
  for (int64_t id : prompt)
    ARTEL_CHECK(id >= 0 && id < opts.vocab, "generate: prompt token ", id, " outside [0, ", opts.vocab, ")");

  std::vector<int64_t> out = prompt;
  for (int64_t n = 0; n < max_new_tokens; ++n) {
    const int64_t T = std::min<int64_t>(static_cast<int64_t>(out.size()), opts.context);
    Tensor ids = Tensor::empty({1, T}, DType::i64);
    std::copy(out.end() - T, out.end(), ids.data<int64_t>());
    std::vector<float> row = next(ids);
    ARTEL_CHECK(static_cast<int64_t>(row.size()) == opts.vocab, "generate: got ", row.size(), " logits, expected ",
                opts.vocab);
    // NaN or infinite weights give such logits; sampling them would print
    // nonsense as if it were the model's.
    const auto bad = std::find_if(row.begin(), row.end(), [](float v) { return !std::isfinite(v); });
    if (bad != row.end())
      throw Error("generate: logit " + std::to_string(bad - row.begin()) + " of token " + std::to_string(n + 1) +
                      " is " + std::to_string(*bad) + ", not a finite number",
                  "the weights hold NaN or infinite values: sample from other weights");
    for (float& v : row) v /= temperature;
    // A temperature near float32's smallest (1e-45) overflows a logit to inf,
    // and the softmax of infinities is NaN: token 0 came out every time.
    if (std::any_of(row.begin(), row.end(), [](float v) { return !std::isfinite(v); }))
      throw Error("generate: temperature " + std::to_string(temperature) + " is too small: a logit divided by it is " +
                      "past float32's range",
                  "use a temperature of at least 1e-3, or --top-k 1 for the most likely token");
    if (opts.top_k > 0 && opts.top_k < opts.vocab) {
      std::vector<float> sorted = row;
      std::nth_element(sorted.begin(), sorted.begin() + (opts.top_k - 1), sorted.end(), std::greater<float>());
      const float kth = sorted[opts.top_k - 1];
      for (float& v : row)
        if (v < kth) v = -std::numeric_limits<float>::infinity();
    }
    out.push_back(sample(row, rng));
  }
  return out;
}

}  // namespace artel::models
