// causal_self_attention: the fused kernel of kernels/attention.h, recorded with
// its hand-written backward. Saves the softmax probabilities (B, n_head, T, Tp)
// for backward instead of recomputing them: at nanoGPT sizes that is a few MB.
#include "artel/autograd/ops.h"
#include "artel/kernels/attention.h"

namespace artel::autograd {

Variable causal_self_attention(const Variable& qkv, int64_t n_head) {
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
  kernels::attention_forward(d, x.data<float>(), y.data<float>(), probs.data<float>());
  return make_result(y, {qkv}, "causal_self_attention",
                     [qkv, probs, d](const Tensor& g, std::vector<Tensor>& gi) {
                       if (!needs_grad(qkv)) return;
                       gi[0] = Tensor::empty(qkv.shape());
                       kernels::attention_backward(d, qkv.value().data<float>(), probs.data<float>(),
                                                   g.data<float>(), gi[0].data<float>());
                     });
}

}  // namespace artel::autograd
