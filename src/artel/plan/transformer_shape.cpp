#include "artel/plan/transformer_shape.h"

#include "artel/core/error.h"

namespace artel::plan {

void TransformerShape::validate() const {
  ARTEL_CHECK(n_layer >= 1, "model: n_layer must be >= 1, got ", n_layer);
  ARTEL_CHECK(n_head >= 1, "model: n_head must be >= 1, got ", n_head);
  ARTEL_CHECK(n_embd >= 1, "model: n_embd must be >= 1, got ", n_embd);
  ARTEL_CHECK(n_embd % n_head == 0, "model: n_head (", n_head, ") must divide n_embd (", n_embd, ")");
  ARTEL_CHECK(seq >= 1, "model: the sequence length must be >= 1, got ", seq);
  ARTEL_CHECK(vocab >= 1, "model: the vocabulary must be >= 1, got ", vocab);
}

double block_parameters(const TransformerShape& shape) {
  const double h = static_cast<double>(shape.n_embd);
  return 12 * h * h + 13 * h;
}

double embedding_parameters(const TransformerShape& shape) {
  return static_cast<double>(shape.vocab + shape.seq) * static_cast<double>(shape.n_embd);
}

double head_parameters(const TransformerShape& shape) { return 2.0 * static_cast<double>(shape.n_embd); }

double total_parameters(const TransformerShape& shape) {
  return embedding_parameters(shape) + static_cast<double>(shape.n_layer) * block_parameters(shape) +
         head_parameters(shape);
}

double block_forward_flops(const TransformerShape& shape, double sequences) {
  const double s = static_cast<double>(shape.seq), h = static_cast<double>(shape.n_embd);
  return sequences * 24 * s * h * h + attention_core_forward_flops(shape, sequences);
}

double attention_core_forward_flops(const TransformerShape& shape, double sequences) {
  const double s = static_cast<double>(shape.seq), h = static_cast<double>(shape.n_embd);
  return sequences * 4 * s * s * h;
}

double logits_forward_flops(const TransformerShape& shape, double sequences) {
  return sequences * 2.0 * static_cast<double>(shape.seq) * static_cast<double>(shape.n_embd) *
         static_cast<double>(shape.vocab);
}

double narayanan_iteration_flops(const TransformerShape& shape, double batch) {
  const double s = static_cast<double>(shape.seq), h = static_cast<double>(shape.n_embd);
  const double l = static_cast<double>(shape.n_layer), v = static_cast<double>(shape.vocab);
  return 96 * batch * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h));
}

}  // namespace artel::plan
