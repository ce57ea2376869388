// The activation bytes a GPT keeps from forward until backward, per
// micro-batch of b sequences on one worker, under one of two accountings
// (Workload::activations):
//
// megatron — Korthikanti et al. 2022 (arXiv 2205.05198, §4), bytes at 16 bits
// (×e/2 at e bytes an element), with dropout:
//   none:       s·b·h·(10 + 24/t + 5·a·s/(h·t))     with sp: s·b·h·(34 + 5·a·s/h)/t
//   selective:  s·b·h·(10 + 24/t)                    with sp: 34·s·b·h/t
//   full:       2·s·b·h (the block's input)          with sp: 2·s·b·h/t
// plus the embedding's dropout mask (s·b·h, /t with sp) and the output
// layer's 4·s·b·(h + V)/t. Without dropout the two 1-byte masks of the
// block's dropouts, the attention dropout's mask and its output are not kept:
// 10 → 8 and 5·a·s/h → 2·a·s/h, and the embedding keeps no mask.
//
// artel — what artel's own autograd holds, counted from its ops: what each
// op's backward reads, in fp32 but for bf16 products' inputs (a graph
// keeps no input only for its edge: Note [Edges without values] in
// autograd/variable.cpp). A block keeps, a token, in floats: its output,
// ln_1's and ln_2's outputs and the attention's residual sum (4h,
// replicated); c_attn's q|k|v, the attention's output, GELU's output and the
// GELU derivative that c_fc's fused product and GELU (autograd::linear_gelu)
// saves instead of the product (12h, split over tp); the softmax
// probabilities the fused attention saves (a·Tp/t, Tp = s rounded up to 16).
// Under tp a row-parallel product's partial sum is freed once it is summed,
// so tp adds nothing replicated; dropout adds each sublayer's mask (2h).
// bf16 products keep bf16 copies of their inputs (2h + 5h/t a token) and of
// the block's weights (12h²/t), 2 bytes each, and not the fp32 inputs:
// ln_1's and ln_2's outputs, the attention's and GELU's go, as does the
// head's fp32 input. Selective recomputation drops
// the probabilities (rebuilt in backward); full keeps the block's input. The
// embedding counts 2h at the report's peak whatever the tp (3h with
// dropout: its mask), the head ln_f's output (h) and the logits' gradient,
// which the loss makes in forward (V/t; the logits are freed), plus under
// bf16 its input's and the tied table's copies. Measured against artel's
// memory report: tools/plan_vs_measured.py.
//
// While a block runs backward, `working` bytes are alive beside the kept
// ones, plus what recomputation rebuilds: megatron, the gradients of all the
// block kept (one block's none-kept bytes); artel, whose backward frees what
// each op kept as the op finishes, the gradients in flight in the MLP's
// backward (the incoming one and GELU's output's and input's: h + 8h/t
// floats a token, the last bf16 under bf16 products).
//
//   const ActivationShape x{.b = 4, .s = 1024, .h = 768, .a = 12, .v = 50304, .t = 1, ...};
//   BlockActivations blk = block_activations(x);   // blk.kept, blk.working
#pragma once

#include "artel/plan/layout.h"

namespace artel::plan {

struct ActivationShape {
  double b = 1, s = 1, h = 1, a = 1, v = 1, t = 1;  // micro-batch, sequence, width, heads, vocabulary, tp
  Precision precision = Precision::fp32;             // of the matrix products
  Recompute recompute = Recompute::none;
  bool sequence_parallel = false;
  bool dropout = false;
  Activations accounting = Activations::megatron;
};

struct BlockActivations {
  double kept = 0;     // bytes kept from forward until backward
  double working = 0;  // bytes alive only while the block runs backward
};

BlockActivations block_activations(const ActivationShape& x);
double embedding_activations(const ActivationShape& x);  // the first stage's
double head_activations(const ActivationShape& x);       // the last stage's

}  // namespace artel::plan
