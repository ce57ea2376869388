// Fused multi-head causal self-attention: nanoGPT's CausalSelfAttention before
// c_proj, forward and hand-written backward on raw arrays.
//
// qkv (B, T, 3C) holds [q | k | v] along the last dim (c_attn's output); head h
// uses channels h·hs … (h+1)·hs−1 of each, hs = C / n_head. Per (b, h):
//   P = softmax(q kᵀ / √hs with the causal mask j ≤ i)    (T, T), kept for backward
//   y = P v                                                 head h's channels of y (B, T, C)
// The B·n_head (b, h) items are split over artel's threads. Inside one,
// register-blocked products stop at the diagonal block, so most of the masked
// upper triangle is never computed (about half the FLOPs of a full attention).
// P is computed and kept transposed (queries along the vectors' lanes), so the
// softmax runs lane-wise down columns instead of reducing across each row.
//
//   AttentionDims d{B, T, C, n_head};
//   std::vector<float> probs(d.probs_numel());
//   attention_forward(d, qkv, y, probs.data());
//   attention_backward(d, qkv, probs.data(), dy, dqkv);
#pragma once

#include <cstdint>

namespace artel::kernels {

struct AttentionDims {
  int64_t batch = 0, time = 0, channels = 0, n_head = 0;

  int64_t head_size() const { return channels / n_head; }
  // Rows of the saved probabilities are padded to whole 16-float vectors, an
  // odd number of them (Note [Odd row strides], attention.cpp).
  int64_t padded_time() const { return ((time + 15) / 16 | 1) * 16; }
  // Elements of the saved probabilities, (B, n_head, T, Tp) with Tp = padded_time().
  int64_t probs_numel() const { return batch * n_head * time * padded_time(); }
};

// qkv (B, T, 3C) -> y (B, T, C) and probs (B, n_head, T, Tp), which holds each
// (b, h)'s Pᵀ: probs[b][h][j][i] = P[i][j]. Written for 16·⌊j/16⌋ ≤ i < 16·⌈T/16⌉
// (zero where i < j or i ≥ T); the rest is never read. Requires n_head > 0 dividing C (the op checks).
// Where attention multiplies on bf16 pairs (attention_rounds_qkv), it reads
// qkv rounded to bf16 whole (B, T, 3C), which forward takes from the caller
// as qkv_rounded (round_operand's rounding) instead of rounding qkv itself.
void attention_forward(const AttentionDims& d, const float* qkv, float* y, float* probs,
                       const uint16_t* qkv_rounded = nullptr);

// From dy (B, T, C), the forward's qkv and probs: dqkv (B, T, 3C) = [dq | dk | dv],
// every element written (no accumulation). Given forward's qkv_rounded, it
// multiplies on pairs and never reads qkv, which may be null: an op keeps
// the rounding, at half qkv's bytes (W2 bf16 at 1 thread: ~2% a step, AMD
// Zen 4, from rounding qkv once instead of twice).
//   dV = Pᵀ dY,  dP = dY Vᵀ,  dS = P ∘ (dP − rowsum(dP ∘ P)),  dQ = dS K / √hs,  dK = dSᵀ Q / √hs
void attention_backward(const AttentionDims& d, const float* qkv, const float* probs, const float* dy, float* dqkv,
                        const uint16_t* qkv_rounded = nullptr);

// How attention multiplies under bf16 precision (kernels::gemm_precision):
// on bf16 pairs through VDPBF16PS (Note [Pair layouts]), or in fp32 as under
// fp32 precision. `automatic` (the default) takes pairs where they are the
// faster: on AMD, whose VDPBF16PS adds twice an FMA's products a cycle (Zen 5:
// GPT-2's heads, forward and backward, 8.7 -> 5.7 ms a layer). Intel's issues
// on one port against FMA's two, the same 32 products a cycle, so there the
// pairs gain nothing and pay for their layouts: on Emerald Rapids (model 207)
// they ran W2's heads 1.10 -> 1.40 ms and GPT-2's 26.4 -> 34.2 ms a layer.
// Process-wide, like the precision; an odd head size always multiplies in fp32.
enum class AttentionProducts { automatic, fp32, bf16_pairs };
void set_attention_products(AttentionProducts p);
// Whether attention's products run on bf16 pairs under bf16 precision here.
bool attention_products_on_pairs();
// Whether attention of this head size multiplies on bf16 pairs under bf16
// precision here: attention_products_on_pairs, and an even head size.
bool attention_on_pairs_at(int64_t head_size);
// Whether attention of these dims multiplies on bf16 pairs now: under bf16
// precision, attention_on_pairs_at its head size.
bool attention_rounds_qkv(const AttentionDims& d);

}  // namespace artel::kernels
