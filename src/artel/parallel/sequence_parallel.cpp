// The sequence-parallel ops: each forward next to its backward. A rank's
// tokens are a contiguous 1/P of the activation (Note [Which tokens a rank
// holds] in sequence_parallel.h), so every collective is a plain all-gather
// or reduce-scatter of equal blocks, straight into or out of the whole.
#include "artel/parallel/sequence_parallel.h"

#include <string>

#include "artel/autograd/op_span.h"
#include "artel/core/error.h"
#include "artel/parallel/tensor_parallel.h"

namespace artel::parallel {
namespace {

using autograd::make_result;

// An all-gather or a reduce-scatter moves (P−1)/P of the whole tensor, half
// an all-reduce's: counted as half an all-reduce, so a gather and a scatter
// together weigh what Megatron's f or g does.
void count_half(const Shape& whole) {
  TensorParallelTraffic::count(static_cast<double>(shape_numel(whole) * static_cast<int64_t>(sizeof(float))) / 2);
}

// The whole activation from this rank's tokens.
Tensor all_gather_tokens(comm::ProcessGroup& g, const Tensor& part, const Shape& whole) {
  count_half(whole);
  Tensor out = Tensor::empty(whole);
  g.all_gather(part, out)->wait();
  return out;
}

// This rank's tokens of the sum over the group of `whole`.
Tensor reduce_scatter_tokens(comm::ProcessGroup& g, const Tensor& whole, const Shape& part_shape) {
  count_half(whole.shape());
  Tensor out = Tensor::empty(part_shape);
  g.reduce_scatter(whole, out)->wait();
  return out;
}

void check_float(const Variable& x, const char* op) {
  ARTEL_CHECK(x.defined(), op, ": undefined input");
  ARTEL_CHECK(x.value().dtype() == DType::f32, op, ": sequence parallelism splits float32 activations, got ",
              dtype_name(x.value().dtype()),
              " (hint: a model whose first piece is a layer takes token ids; start the plan with a piece that is "
              "not a layer, such as the embeddings)");
}

}  // namespace

Shape sequence_part_shape(const Shape& whole, int ranks, const char* op) {
  ARTEL_CHECK(whole.size() >= 2, op, ": an activation of shape ", shape_str(whole),
              " has no token dimension (sequence parallelism splits dim -2 of (..., tokens, features))");
  Shape part = whole;
  int64_t& tokens = part[part.size() - 2];
  ARTEL_CHECK(tokens % ranks == 0, op, ": ", tokens, " tokens (dim -2 of ", shape_str(whole),
              ") do not split over ", ranks, " ranks (hint: with --sequence-parallel, choose a block size (or, for a "
              "model without sequences, a micro-batch) divisible by --tp)");
  tokens /= ranks;
  return part;
}

Shape sequence_whole_shape(const Shape& part, int ranks, const char* op) {
  ARTEL_CHECK(part.size() >= 2, op, ": an activation of shape ", shape_str(part),
              " has no token dimension (sequence parallelism splits dim -2 of (..., tokens, features))");
  Shape whole = part;
  whole[whole.size() - 2] *= ranks;
  return whole;
}

Tensor tokens_of(const Tensor& whole, int rank, int ranks) {
  const Shape part_shape = sequence_part_shape(whole.shape(), ranks, "tokens_of");
  return whole.view({ranks, whole.numel() / ranks}).slice0(rank, rank + 1).view(part_shape).clone();
}

Variable scatter_to_sequence_parallel(const Variable& x, comm::ProcessGroup& group) {
  const autograd::OpSpan span("scatter_to_sequence_parallel");
  check_float(x, "scatter_to_sequence_parallel");
  const Shape whole = x.shape();
  comm::ProcessGroup* pg = &group;  // must outlive the graph (Note [Tensor-parallel contract])
  return make_result(tokens_of(x.value(), group.rank(), group.size()), {x}, "scatter_to_sequence_parallel",
                     [pg, whole](const Tensor& g, std::vector<Tensor>& gi) { gi[0] = all_gather_tokens(*pg, g, whole); });
}

Variable gather_from_sequence_parallel(const Variable& x, comm::ProcessGroup& group, SequenceGrad grad) {
  const autograd::OpSpan span("gather_from_sequence_parallel");
  check_float(x, "gather_from_sequence_parallel");
  const Shape part = x.shape(), whole = sequence_whole_shape(part, group.size(), "gather_from_sequence_parallel");
  comm::ProcessGroup* pg = &group;
  Variable y = make_result(all_gather_tokens(group, x.value(), whole), {x}, "gather_from_sequence_parallel",
                           [pg, part, grad](const Tensor& g, std::vector<Tensor>& gi) {
                             gi[0] = grad == SequenceGrad::partial ? reduce_scatter_tokens(*pg, g, part)
                                                                   : tokens_of(g, pg->rank(), pg->size());
                           });
  // Megatron's: a product that reads the gathered tokens in backward (a
  // column-parallel layer's dW) keeps this rank's and gathers them again
  // there (Note [Values made again]): 1/P of them kept, one all-gather more.
  if (grad == SequenceGrad::partial && y.grad_fn())
    y.set_remake([pg, mine = x.value(), whole] { return all_gather_tokens(*pg, mine, whole); });
  return y;
}

Variable reduce_scatter_to_sequence_parallel(const Variable& x, comm::ProcessGroup& group) {
  const autograd::OpSpan span("reduce_scatter_to_sequence_parallel");
  check_float(x, "reduce_scatter_to_sequence_parallel");
  const Shape whole = x.shape();
  const Shape part = sequence_part_shape(whole, group.size(), "reduce_scatter_to_sequence_parallel");
  comm::ProcessGroup* pg = &group;
  return make_result(reduce_scatter_tokens(group, x.value(), part), {x}, "reduce_scatter_to_sequence_parallel",
                     [pg, whole](const Tensor& g, std::vector<Tensor>& gi) { gi[0] = all_gather_tokens(*pg, g, whole); });
}

}  // namespace artel::parallel
