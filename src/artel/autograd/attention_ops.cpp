// causal_self_attention: the fused kernel of kernels/attention.h, recorded with
// its hand-written backward. Saves the softmax probabilities (B, n_head, T, Tp)
// for backward instead of recomputing them: at nanoGPT sizes that is a few MB.
// Keeps qkv for backward, or on bf16 pairs only its rounding.
#include "artel/autograd/op_span.h"
#include "artel/autograd/ops.h"
#include "artel/kernels/attention.h"
#include "artel/kernels/gemm.h"

namespace artel::autograd {

Variable causal_self_attention(const Variable& qkv, int64_t n_head) {
  const OpSpan span("causal_self_attention");
  ARTEL_CHECK(qkv.defined(), "causal_self_attention: qkv is undefined");
  const Tensor& x = qkv.value();
  ARTEL_CHECK(x.dtype() == DType::f32 && x.dim() == 3 && x.size(2) % 3 == 0,
              "causal_self_attention: qkv must be float32 (B, T, 3C), got shape ", shape_str(x.shape()),
              " (hint: pass c_attn's output, [q | k | v] along the last dim)");
  const int64_t c = x.size(2) / 3;
  ARTEL_CHECK(n_head > 0 && c > 0 && c % n_head == 0, "causal_self_attention: n_head ", n_head,
              " must be positive and divide C = ", c, " (hint: choose n_embd as a multiple of n_head)");
  kernels::AttentionDims d{x.size(0), x.size(1), c, n_head};
  Tensor y = Tensor::empty({d.batch, d.time, c});
  Tensor probs = Tensor::empty({d.batch, n_head, d.time, d.padded_time()});
  // On bf16 pairs qkv is rounded once, here: forward multiplies by the
  // rounding and backward keeps only it, not qkv (half the bytes).
  Tensor qkv16, kept = x;
  if (kernels::attention_rounds_qkv(d)) {
    qkv16 = Tensor::empty(x.shape(), DType::bf16);
    kernels::round_operand(x.data<float>(), d.batch * d.time, 3 * c, 3 * c, static_cast<uint16_t*>(qkv16.raw()));
    kept = Tensor();
  }
  auto bits = [](const Tensor& t) { return t.defined() ? static_cast<const uint16_t*>(t.raw()) : nullptr; };
  kernels::attention_forward(d, x.data<float>(), y.data<float>(), probs.data<float>(), bits(qkv16));
  return make_result(y, {qkv}, "causal_self_attention",
                     [kept, qkv16, probs, d, bits, shape = x.shape()](const Tensor& g, std::vector<Tensor>& gi) {
                       gi[0] = Tensor::empty(shape);
                       kernels::attention_backward(d, kept.defined() ? kept.data<float>() : nullptr,
                                                   probs.data<float>(), g.data<float>(), gi[0].data<float>(),
                                                   bits(qkv16));
                     });
}

}  // namespace artel::autograd
