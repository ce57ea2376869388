#include "artel/plan/kept_activations.h"

#include <cmath>

#include "artel/kernels/attention.h"
#include "artel/plan/stage_work.h"

namespace artel::plan {
namespace {

double replicated_split(const ActivationShape& x) { return x.sequence_parallel ? x.t : 1.0; }

// Korthikanti's counts are at 16 bits; fp32 activations double them.
double megatron_scale(const ActivationShape& x) { return activation_element_bytes(x.precision) / 2; }

BlockActivations megatron_block(const ActivationShape& x) {
  const double t = x.t, sbh = x.s * x.b * x.h, a_s_h = x.a * x.s / x.h;
  const double replicated = x.dropout ? 10 : 8, per_score = x.dropout ? 5 : 2;
  const double none_kept = x.sequence_parallel ? sbh * (replicated + 24 + per_score * a_s_h) / t
                                               : sbh * (replicated + 24 / t + per_score * a_s_h / t);
  BlockActivations out{.kept = none_kept, .working = none_kept};
  switch (x.recompute) {
    case Recompute::none: break;
    case Recompute::selective:
      out.kept = x.sequence_parallel ? (replicated + 24) * sbh / t : sbh * (replicated + 24 / t);
      out.working += per_score * x.a * x.s * x.s * x.b / t;  // the scores, rebuilt
      break;
    case Recompute::full:
      out.kept = 2 * sbh / replicated_split(x);
      out.working += none_kept;  // the block, rebuilt
      break;
  }
  out.kept *= megatron_scale(x);
  out.working *= megatron_scale(x);
  return out;
}

BlockActivations artel_block(const ActivationShape& x) {
  const double t = x.t, h = x.h, tokens = x.s * x.b;
  const auto padded = static_cast<double>(kernels::AttentionDims{.time = static_cast<int64_t>(x.s)}.padded_time());
  // bf16 products keep a bf16 copy of their input instead of the fp32 one:
  // ln_1's and ln_2's outputs (2h replicated), the attention's and GELU's
  // outputs (5h/t) are kept at 2 bytes, and on bf16 pairs qkv (3h/t) too.
  const bool bf16 = x.precision == Precision::bf16;
  // Replicated: the block's input and the residual sum (the layer norms'
  // inputs), the layer norms' outputs (c_attn's and c_fc's inputs; under
  // bf16 products their bf16 copies, below) and the dropout masks. Sequence
  // parallelism keeps this rank's tokens of each: the norms' outputs in fp32,
  // gathered again for dW (Megatron's way, Note [Values made again]).
  const bool norms_fp32 = !bf16 || x.sequence_parallel;
  // Where attention multiplies on bf16 pairs (on this machine: AMD) it keeps
  // qkv (3h/t) rounded instead of in fp32.
  const bool qkv_rounded = bf16 && kernels::attention_on_pairs_at(static_cast<int64_t>(h / x.a));
  const double replicated = (2 + (norms_fp32 ? 2 : 0) + (x.dropout ? 2 : 0)) * h / replicated_split(x);
  const double probabilities = 4 * tokens * x.a * padded / t;
  double none_kept = 4 * tokens * (replicated + (bf16 ? (qkv_rounded ? 4 : 7) : 12) * h / t) + probabilities;
  if (bf16)
    none_kept += 2 * tokens * ((norms_fp32 ? 0 : 2 * h) + (qkv_rounded ? 8 : 5) * h / t) + 2 * 12 * h * h / t;
  // Backward frees what each op kept as the op finishes, so beside the kept
  // bytes only the gradients in flight are alive: at most in the MLP's
  // backward, the incoming gradient, GELU's output's and c_fc's output's
  // (bf16 under bf16 products: linear_gelu rounds it as it makes it).
  const double product_gradient = x.precision == Precision::bf16 ? 2 : 4;
  BlockActivations out{.kept = none_kept, .working = 4 * tokens * (h + 4 * h / t) + product_gradient * tokens * 4 * h / t};
  if (x.sequence_parallel) out.working += (bf16 ? 6 : 4) * tokens * h;  // a norm's output gathered again (and rounded)
  switch (x.recompute) {
    case Recompute::none: break;
    case Recompute::selective:
      out.kept -= probabilities;
      out.working += probabilities;
      break;
    case Recompute::full:
      out.kept = 4 * tokens * h / replicated_split(x);
      out.working += none_kept;
      break;
  }
  return out;
}

}  // namespace

BlockActivations block_activations(const ActivationShape& x) {
  return x.accounting == Activations::artel ? artel_block(x) : megatron_block(x);
}

double embedding_activations(const ActivationShape& x) {
  const double sbh = x.s * x.b * x.h;
  if (x.accounting == Activations::megatron) return x.dropout ? sbh / replicated_split(x) : 0;  // a 1-byte mask
  return 4 * sbh * (2 + (x.dropout ? 1 : 0));  // artel runs the embeddings whole, and splits the tokens after them
}

double head_activations(const ActivationShape& x) {
  const double tokens = x.s * x.b, h = x.h, t = x.t;
  if (x.accounting == Activations::megatron) return 4 * tokens * (h + x.v) / t * megatron_scale(x);
  if (x.precision == Precision::bf16)  // ln_f's output as the head's bf16 input, and the tied table's copy
    return 4 * tokens * x.v / t + 2 * tokens * h + 2 * x.v / t * h;
  return 4 * tokens * (h + x.v / t);  // ln_f's output: the tokens gathered whole again before the head
}

}  // namespace artel::plan
