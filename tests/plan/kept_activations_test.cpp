// The two activation accountings against hand counts of what each keeps:
// artel's, tensor by tensor from its autograd ops (checked against a real
// run's memory report in plan_command_test.cpp), and Megatron-LM's
// (Korthikanti et al. 2022; memory_model_test.cpp checks it whole).
#include "artel/plan/kept_activations.h"

#include <gtest/gtest.h>

#include "artel/kernels/attention.h"

namespace artel::plan {
namespace {

// s = 40 pads to Tp = 48 in the fused attention's saved probabilities.
ActivationShape artel_shape(double t = 1, Recompute r = Recompute::none, Precision p = Precision::fp32) {
  return {.b = 2, .s = 40, .h = 64, .a = 4, .v = 100, .t = t, .precision = p, .recompute = r,
          .accounting = Activations::artel};
}

TEST(KeptActivations, ArtelKeepsWhatEachBackwardReadsGeluDerivativeAndProbabilitiesInFp32) {
  const double tokens = 2 * 40, h = 64, a = 4, tp_time = 48;
  const BlockActivations b = block_activations(artel_shape());
  // 4h replicated (block output, two layer-norm outputs, the residual sum) +
  // 12h (q|k|v, attention output, GELU's output and derivative: c_fc's
  // product fused with GELU keeps no output of its own) + the probabilities,
  // 4 bytes each.
  EXPECT_DOUBLE_EQ(b.kept, 4 * tokens * (16 * h + a * tp_time));
  EXPECT_DOUBLE_EQ(b.working, 4 * tokens * 9 * h);
  EXPECT_DOUBLE_EQ(embedding_activations(artel_shape()), 4 * tokens * 2 * h);
  // ln_f's output and the logits' gradient, made by the loss in forward.
  EXPECT_DOUBLE_EQ(head_activations(artel_shape()), 4 * tokens * (h + 100));
}

TEST(KeptActivations, ArtelUnderTensorParallelismSplitsTheMatricesOutputsAndFreesThePartialSums) {
  const double tokens = 2 * 40, h = 64, a = 4, tp_time = 48, t = 2;
  const BlockActivations b = block_activations(artel_shape(t));
  // The 12h and the probabilities halve; the row-parallel products' partial
  // sums are freed once summed, so the 4h replicated stay as they are.
  EXPECT_DOUBLE_EQ(b.kept, 4 * tokens * (4 * h + 12 * h / t + a * tp_time / t));
  EXPECT_DOUBLE_EQ(b.working, 4 * tokens * (h + 8 * h / t));
  EXPECT_DOUBLE_EQ(embedding_activations(artel_shape(t)), 4 * tokens * 2 * h);
  EXPECT_DOUBLE_EQ(head_activations(artel_shape(t)), 4 * tokens * (h + 100 / t));
}

// Sequence parallelism (artel's, parallel/sequence_parallel.h): the block's
// input, the residual sum, the layer norms' outputs (gathered again for
// c_attn's and c_fc's dW) and the masks are this rank's tokens; the
// embeddings and the head run on all the tokens.
TEST(KeptActivations, ArtelSequenceParallelismKeepsThisRanksTokensOfTheStream) {
  const double tokens = 2 * 40, h = 64, t = 2;
  ActivationShape tp = artel_shape(t), sp = artel_shape(t);
  sp.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(block_activations(tp).kept - block_activations(sp).kept, 4 * tokens * 4 * h * (1 - 1 / t));
  // In backward, a layer norm's output gathered whole again for its product's dW.
  EXPECT_DOUBLE_EQ(block_activations(sp).working - block_activations(tp).working, 4 * tokens * h);
  tp.dropout = sp.dropout = true;
  EXPECT_DOUBLE_EQ(block_activations(tp).kept - block_activations(sp).kept, 4 * tokens * 6 * h * (1 - 1 / t));
  tp.precision = sp.precision = Precision::bf16;  // the norms' outputs: this rank's in fp32, not all in bf16
  EXPECT_DOUBLE_EQ(block_activations(tp).kept - block_activations(sp).kept,
                   4 * tokens * 4 * h * (1 - 1 / t) + 2 * tokens * 2 * h - 4 * tokens * 2 * h / t);
  EXPECT_DOUBLE_EQ(embedding_activations(sp), embedding_activations(tp));
  EXPECT_DOUBLE_EQ(head_activations(sp), head_activations(tp));
  sp.recompute = tp.recompute = Recompute::full;  // only the block's input, this rank's tokens of it
  EXPECT_DOUBLE_EQ(block_activations(sp).kept, block_activations(tp).kept / t);
}

TEST(KeptActivations, ArtelDropoutKeepsOnlyItsMasks) {
  const double tokens = 2 * 40, h = 64;
  ActivationShape x = artel_shape();
  x.dropout = true;
  EXPECT_DOUBLE_EQ(block_activations(x).kept - block_activations(artel_shape()).kept, 4 * tokens * 2 * h);
  EXPECT_DOUBLE_EQ(embedding_activations(x) - embedding_activations(artel_shape()), 4 * tokens * h);
}

TEST(KeptActivations, ArtelBf16KeepsTheProductsInputsAsBf16CopiesInsteadOfFp32) {
  const double tokens = 2 * 40, h = 64;
  const double fp32 = block_activations(artel_shape()).kept;
  const double bf16 = block_activations(artel_shape(1, Recompute::none, Precision::bf16)).kept;
  // Inputs of c_attn, c_proj, c_fc and the MLP's c_proj (h + h + h + 4h) at
  // 2 bytes instead of 4, and the block's 12h² weights, 2 bytes each; where
  // attention multiplies on bf16 pairs (this machine decides), qkv (3h) too.
  const double qkv = kernels::attention_products_on_pairs() ? 3 * h : 0;
  EXPECT_DOUBLE_EQ(bf16 - fp32, -2 * tokens * (7 * h + qkv) + 2 * 12 * h * h);
  // In backward, c_fc's output's gradient is made bf16 (4h at 2 bytes, not 4).
  EXPECT_DOUBLE_EQ(block_activations(artel_shape()).working -
                       block_activations(artel_shape(1, Recompute::none, Precision::bf16)).working,
                   2 * tokens * 4 * h);
  // The head's input (ln_f's output) at 2 bytes, and the tied table's copy.
  EXPECT_DOUBLE_EQ(head_activations(artel_shape(1, Recompute::none, Precision::bf16)) - head_activations(artel_shape()),
                   -2 * tokens * h + 2 * 100 * h);
}

TEST(KeptActivations, ArtelRecomputationDropsTheProbabilitiesOrAllButTheBlocksInput) {
  const double tokens = 2 * 40, h = 64, a = 4, tp_time = 48;
  const BlockActivations none = block_activations(artel_shape());
  const BlockActivations sel = block_activations(artel_shape(1, Recompute::selective));
  const BlockActivations full = block_activations(artel_shape(1, Recompute::full));
  const double probabilities = 4 * tokens * a * tp_time;
  EXPECT_DOUBLE_EQ(sel.kept, none.kept - probabilities);
  EXPECT_DOUBLE_EQ(sel.working, none.working + probabilities);  // rebuilt while the block runs backward
  EXPECT_DOUBLE_EQ(full.kept, 4 * tokens * h);
  EXPECT_DOUBLE_EQ(full.working, none.working + none.kept);  // the whole block, rebuilt
}

TEST(KeptActivations, MegatronIsKorthikantisCountAtTheActivationsPrecision) {
  ActivationShape x = artel_shape();
  x.accounting = Activations::megatron;
  x.dropout = true;
  x.precision = Precision::bf16;
  const double s = 40, b = 2, h = 64, a = 4;
  EXPECT_DOUBLE_EQ(block_activations(x).kept, s * b * h * (34 + 5 * a * s / h));
  x.precision = Precision::fp32;
  EXPECT_DOUBLE_EQ(block_activations(x).kept, 2 * s * b * h * (34 + 5 * a * s / h));
}

}  // namespace
}  // namespace artel::plan
