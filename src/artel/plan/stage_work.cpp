#include "artel/plan/stage_work.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "artel/core/error.h"
#include "artel/plan/collective_cost.h"
#include "artel/plan/kept_activations.h"

namespace artel::plan {

double activation_element_bytes(Precision p) { return p == Precision::bf16 ? 2.0 : 4.0; }

std::vector<double> unit_parameters(const StageWork& st) {
  std::vector<double> units(st.unit_backward.size());
  for (const ParameterTensor& p : st.tensors) {
    ARTEL_CHECK(p.unit < units.size(), "stage work: a tensor of unit ", p.unit, " of ", units.size());
    units[p.unit] += p.elements;
  }
  return units;
}

std::vector<UnitBucket> unit_buckets(const StageWork& st, const parallel::BucketOptions& opts, bool tables_apart) {
  auto apart = [&](const ParameterTensor& p) {
    return tables_apart && p.tied_table && parallel::table_kept_apart(p.elements, opts);
  };
  std::vector<size_t> planned;
  std::vector<int64_t> numels;
  for (size_t i = 0; i < st.tensors.size(); ++i)
    if (!apart(st.tensors[i])) planned.push_back(i), numels.push_back(static_cast<int64_t>(st.tensors[i].elements));
  std::vector<UnitBucket> out;
  for (const parallel::Bucket& b : parallel::plan_buckets(numels, opts)) {
    UnitBucket u{.parameters = static_cast<double>(b.numel), .completed_by = SIZE_MAX};
    for (int i : b.params) u.completed_by = std::min(u.completed_by, st.tensors[planned[static_cast<size_t>(i)]].unit);
    out.push_back(u);
  }
  for (const ParameterTensor& p : st.tensors)  // its dense gradient is the head's, the first unit backward runs
    if (apart(p)) out.push_back({.parameters = p.elements, .completed_by = st.unit_backward.size() - 1, .table = true});
  return out;
}

bool keeps_tables_apart(const Layout& l, const Workload& w) {
  return w.tables_apart && l.zero <= 2 && l.compression.kind != Compression::Kind::powersgd;
}

namespace {

// What every cost of a GPT stage needs: the shape, the split and the rates.
struct GptContext {
  const TransformerShape& shape;
  const Cluster& cluster;
  const Layout& layout;
  const Workload& workload;
  double b, s, h, a, v, t;  // micro-batch sequences, tokens, width, heads, vocabulary, tp
  double e;                 // bytes of an activation element
  double tokens() const { return b * s; }
  // Layer norms, dropouts and residual adds: split over tp only under sequence parallelism.
  double replicated_split() const { return layout.sequence_parallel ? t : 1.0; }
  Precision precision() const { return workload.precision; }
  double gemm(double m, double n, double k) const { return gemm_seconds(cluster.device, workload.precision, m, n, k); }
  double stream(double bytes) const { return streaming_seconds(cluster.device, bytes); }
  // One tp all-reduce of the (b, s, h) activation; under sequence
  // parallelism an all-gather plus a reduce-scatter of it, the same time.
  double activation_all_reduce() const {
    if (t <= 1) return 0;
    const GroupPlacement g = place_group(cluster, layout.tp, 1);
    return all_reduce_seconds(cluster, g, tokens() * h * e);
  }
  ActivationShape activation_shape() const {
    return {.b = b, .s = s, .h = h, .a = a, .v = v, .t = t, .precision = workload.precision,
            .recompute = layout.recompute, .sequence_parallel = layout.sequence_parallel,
            .dropout = workload.dropout, .accounting = workload.activations};
  }
};

// The attention core of one block: Q·Kᵀ (s×s over h/a) and P·V per head,
// b·a/t of them on this worker.
double attention_core_gemm_seconds(const GptContext& c) {
  const double dh = c.h / c.a;
  return c.b * c.a / c.t * (c.gemm(c.s, c.s, dh) + c.gemm(c.s, dh, c.s));
}

// Scale-mask-softmax (read and write the scores) and its dropout (again):
// 4·a·s/t elements a token.
double attention_core_stream_bytes(const GptContext& c) { return c.tokens() * c.e * 4 * c.a * c.s / c.t; }

struct BlockCost {
  double forward = 0, backward = 0, recompute = 0, forward_tp = 0, recompute_tp = 0, flops = 0, kept = 0, working = 0;
};

BlockCost block_cost(const GptContext& c) {
  const double T = c.tokens(), h = c.h, t = c.t;
  // (T, h) x (h, 3h/t) -> q, k, v;  (T, h/t) x (h/t, h) -> proj;  (T, h) x (h, 4h/t) -> fc;  (T, 4h/t) x (4h/t, h).
  const double weights =
      c.gemm(T, 3 * h / t, h) + c.gemm(T, h, h / t) + c.gemm(T, 4 * h / t, h) + c.gemm(T, h, 4 * h / t);
  // The attention core: measured as artel's fused kernel runs it where the
  // cluster has an attention table (its backward is not twice its forward:
  // it recomputes nothing but multiplies four products to forward's two),
  // else its per-head products and the softmax's streams.
  const std::optional<AttentionSeconds> fused = attention_seconds(c.cluster.device, c.precision(), c.b * c.a / t, c.s, h / c.a);
  const double core = fused ? fused->forward : attention_core_gemm_seconds(c) + c.stream(attention_core_stream_bytes(c));
  const double core_backward = fused ? fused->backward : 2 * core;
  // Per token: ln_1, ln_2 (read h, write h each), two dropout+residual adds
  // (read 2h, write h each) = 10h, split over tp only with sp; GELU with its
  // bias (read 4h, write 4h) and the q/k/v transposes (read 3h, write 3h) =
  // 14h/t.
  const double streams = T * c.e * (10 * h / c.replicated_split() + 14 * h / t);
  BlockCost b;
  b.forward = weights + core + c.stream(streams);
  b.backward = 2 * (weights + c.stream(streams)) + core_backward;
  b.forward_tp = 2 * c.activation_all_reduce();
  const double fwd_flops = block_forward_flops(c.shape, c.b) / t;
  const BlockActivations kept = block_activations(c.activation_shape());
  b.kept = kept.kept;
  b.working = kept.working;
  switch (c.layout.recompute) {
    case Recompute::none:
      b.flops = 3 * fwd_flops;
      break;
    case Recompute::selective:
      b.recompute = core;
      b.flops = 3 * fwd_flops + attention_core_forward_flops(c.shape, c.b) / t;
      break;
    case Recompute::full:
      b.recompute = b.forward;
      b.recompute_tp = b.forward_tp;
      b.flops = 4 * fwd_flops;
      break;
  }
  return b;
}

void add_blocks(StageWork& w, const GptContext& c, int64_t count) {
  const BlockCost b = block_cost(c);
  const double n = static_cast<double>(count);
  w.forward_compute += n * b.forward;
  w.recompute_compute += n * b.recompute;
  w.backward_compute += n * (b.backward + b.recompute);
  w.forward_tensor_parallel += n * b.forward_tp;
  w.backward_tensor_parallel += n * (b.forward_tp + b.recompute_tp);
  w.flops += n * b.flops;
  w.activation_bytes += n * b.kept;
  w.working_bytes = std::max(w.working_bytes, b.working);
  const double h = c.h, t = c.t;
  for (int64_t i = 0; i < count; ++i) {
    // As a Block registers them: ln_1, attn.c_attn (column-split), attn.c_proj
    // (row-split: its bias whole), ln_2, mlp.c_fc (column), mlp.c_proj (row).
    for (double p : {h, h, 3 * h * h / t, 3 * h / t, h * h / t, h, h, h, 4 * h * h / t, 4 * h / t, 4 * h * h / t, h})
      w.tensors.push_back({.elements = p, .unit = w.unit_backward.size()});
    w.unit_backward.push_back(b.backward + b.recompute);
    for (Matrix m : {Matrix{h, 3 * h / t}, Matrix{h / t, h}, Matrix{h, 4 * h / t}, Matrix{4 * h / t, h}}) {
      w.matrices.push_back(m);
    }
  }
}

// wte (vocabulary-parallel) and wpe: a row gather, the position add and the
// dropout (3 streams of the (T, h) activation); vocabulary-parallel lookups
// are summed over tp (an all-reduce; a reduce-scatter with sp).
void add_embedding(StageWork& w, const GptContext& c) {
  const double T = c.tokens();
  const double params = c.v / c.t * c.h + c.s * c.h;
  w.parameters += params;
  const bool tied_here = c.layout.pp == 1 && c.layout.tp == 1;  // the head in this stage, plain data parallelism
  w.tensors.push_back({.elements = c.v / c.t * c.h, .unit = w.unit_backward.size(), .tied_table = tied_here});  // wte
  w.tensors.push_back({.elements = c.s * c.h, .unit = w.unit_backward.size()});                              // wpe
  if (tied_here) w.table_rows_bytes = T * (c.h * 4 + 8);  // a row of fp32 gradient and its int64 id a token
  w.matrices.push_back({c.v / c.t, c.h});
  w.matrices.push_back({c.s, c.h});
  const double fwd = c.stream(3 * T * c.h * c.e);
  w.forward_compute += fwd;
  w.backward_compute += 2 * fwd;
  w.unit_backward.push_back(2 * fwd);
  w.forward_tensor_parallel += c.activation_all_reduce();
  w.activation_bytes += embedding_activations(c.activation_shape());
}

// ln_f and the output layer x·wteᵀ over this worker's V/t rows, then
// vocabulary-parallel cross-entropy on fp32 logits: write the logits, read
// them and write fp32 probabilities (2e + 4 bytes an element).
void add_head(StageWork& w, const GptContext& c) {
  const double T = c.tokens(), h = c.h, t = c.t;
  const double params = 2 * h + (c.layout.pp > 1 ? c.v / t * h : 0);  // the last stage's copy of the tied wte
  w.parameters += params;
  const size_t head = w.unit_backward.size();
  for (double p : {h, h}) w.tensors.push_back({.elements = p, .unit = head});  // ln_f
  // The tied wte's copy is the model's first parameter, so the stage's first
  // tensor, though the head's backward makes its gradient.
  if (c.layout.pp > 1) {
    w.tensors.insert(w.tensors.begin(), {.elements = c.v / t * h, .unit = head});
    w.matrices.push_back({c.v / t, h});
  }
  const double fwd =
      c.gemm(T, c.v / t, h) + c.stream(2 * T * h * c.e / c.replicated_split()) + c.stream(T * c.v / t * (2 * c.e + 4));
  w.forward_compute += fwd;
  w.backward_compute += 2 * fwd;
  w.unit_backward.push_back(2 * fwd);
  w.flops += 3 * logits_forward_flops(c.shape, c.b) / t;
  if (t > 1) {
    const GroupPlacement g = place_group(c.cluster, c.layout.tp, 1);
    // cross-entropy's max, sum and target logit: three all-reduces of T floats
    w.forward_tensor_parallel += 3 * all_reduce_seconds(c.cluster, g, T * 4);
    if (c.layout.sequence_parallel) w.forward_tensor_parallel += c.activation_all_reduce();  // all-gather ln_f's output
    w.backward_tensor_parallel += c.activation_all_reduce();                                 // x's gradient summed
  }
  w.activation_bytes += head_activations(c.activation_shape());
}

std::vector<StageWork> gpt_stages(const TransformerShape& shape, const Cluster& cluster, const Layout& l,
                                  const Workload& w) {
  const GptContext c{shape,
                     cluster,
                     l,
                     w,
                     static_cast<double>(micro_batch_size(l, w)),
                     static_cast<double>(shape.seq),
                     static_cast<double>(shape.n_embd),
                     static_cast<double>(shape.n_head),
                     static_cast<double>(shape.vocab),
                     static_cast<double>(l.tp),
                     activation_element_bytes(w.precision)};
  std::vector<StageWork> stages(l.pp);
  const int64_t per_stage = shape.n_layer / l.pp;
  const double block_params = (12 * c.h * c.h + 7 * c.h) / c.t + 6 * c.h;
  for (int64_t s = 0; s < l.pp; ++s) {
    StageWork& st = stages[s];
    if (s == 0) add_embedding(st, c);
    add_blocks(st, c, per_stage);
    st.parameters += static_cast<double>(per_stage) * block_params;
    if (s == l.pp - 1) add_head(st, c);
    st.first_unit_tied_to_last = l.pp == 1;
    const bool scatter = w.scatter_gather_sends || l.sequence_parallel;
    st.boundary_bytes = s == l.pp - 1 ? 0 : c.tokens() * c.h * c.e / (scatter ? c.t : 1.0);
    st.tensor_parallel_message_bytes = l.tp > 1 ? c.tokens() * c.h * c.e : 0;
  }
  return stages;
}

std::vector<StageWork> listed_stages(const ModelDescription& model, const Cluster& cluster, const Layout& l,
                                     const Workload& w) {
  const double b = static_cast<double>(micro_batch_size(l, w));
  const double rate = achieved_flops(cluster.device, w.precision);
  const double t = static_cast<double>(l.tp);
  const bool full = l.recompute == Recompute::full, selective = l.recompute == Recompute::selective;
  const std::vector<parallel::PieceRange> cut = listed_stage_layers(model, l);
  std::vector<StageWork> stages(l.pp);
  for (int64_t s = 0; s < l.pp; ++s) {
    StageWork& st = stages[s];
    double flops = 0, kept = 0, inputs = 0, largest = 0, all_reduces = 0, rerun = 0, rebuilt = 0, in_flight = 0;
    double streams = 0, backward_streams = 0;  // seconds, one sample's work outside the products
    // Its chunks' layers (one run of them but under the interleaved schedule).
    std::vector<size_t> held;
    for (int64_t v = s; v < static_cast<int64_t>(cut.size()); v += l.pp)
      for (auto i = static_cast<size_t>(cut[v].first); i < static_cast<size_t>(cut[v].last); ++i) held.push_back(i);
    for (size_t i : held) {
      const LayerCosts& layer = model.layers[i];  // one of t ranks' share of it (model_description.h)
      const bool last = i + 1 == model.layers.size();
      // In its backward, the gradients of its output and of its input are
      // alive at once; the last layer's output gradient is the loss's, kept below.
      in_flight = std::max(in_flight, (last ? 0 : layer.output_bytes) + (i == 0 ? 0 : model.layers[i - 1].output_bytes));
      const double layer_flops = LayerCosts::per_rank(layer.forward_flops, layer.split_forward_flops, t);
      const double layer_kept = LayerCosts::per_rank(layer.activation_bytes, layer.split_activation_bytes, t) +
                                (t > 1 ? layer.tensor_parallel_activation_bytes : 0);
      const double layer_parameters = LayerCosts::per_rank(layer.parameters, layer.split_parameters, t);
      // Selective: the core's bytes not kept, its forward rerun in backward; split with the layer.
      const double core_split = layer.split_forward_flops > 0 ? t : 1;
      const double layer_rerun = selective ? layer.recomputed_forward_flops / core_split : 0;
      const double layer_rebuilt = selective ? layer.recomputed_activation_bytes / core_split : 0;
      // Its other work splits as its activations do (what it streams, it mostly makes).
      const double share = layer.activation_bytes > 0 ? layer_kept / layer.activation_bytes : 1;
      const double layer_streams = streaming_seconds(cluster.device, layer.stream_bytes * share);
      const double layer_backward_streams = streaming_seconds(cluster.device, layer.backward_stream_bytes * share);
      streams += layer_streams;
      backward_streams += layer_backward_streams;
      rerun += layer_rerun;
      rebuilt = std::max(rebuilt, layer_rebuilt);
      flops += layer_flops;
      kept += layer_kept - layer_rebuilt;
      inputs += i == 0 ? 0 : model.layers[i - 1].output_bytes;
      largest = std::max(largest, layer_kept);
      st.parameters += layer_parameters;
      // A listed layer gives its parameters' total only: one tensor.
      st.tensors.push_back({.elements = layer_parameters, .unit = st.unit_backward.size()});
      st.unit_backward.push_back(
          b * ((layer_flops * (full ? 3 : 2) + layer_rerun) / rate + layer_backward_streams + (full ? layer_streams : 0)));
      if (t > 1 && layer.tensor_parallel_collectives > 0) {  // its whole activations, summed over the tp group
        const double message = b * layer.tensor_parallel_bytes / layer.tensor_parallel_collectives;
        all_reduces += layer.tensor_parallel_collectives *
                       all_reduce_seconds(cluster, place_group(cluster, l.tp, 1), message);
        st.tensor_parallel_message_bytes = std::max(st.tensor_parallel_message_bytes, message);
      }
    }
    const double forward = b * (flops / rate + streams);
    st.forward_compute = forward;
    st.recompute_compute = full ? forward : b * rerun / rate;
    st.backward_compute = b * (2 * flops / rate + backward_streams) + st.recompute_compute;
    // Backward all-reduces as much as forward (Megatron's conjugate f and g), and recomputation reruns forward's.
    st.forward_tensor_parallel = all_reduces;
    st.backward_tensor_parallel = all_reduces * (full ? 2 : 1);
    st.flops = b * (flops * (full ? 4 : 3) + rerun);
    // The loss (cross-entropy) makes the logits' gradient in forward and
    // keeps it for backward (autograd/loss_ops.cpp): the last output again.
    const double loss_gradient = s == l.pp - 1 ? model.layers.back().output_bytes : 0;
    st.activation_bytes = b * ((full ? inputs : kept) + loss_gradient);
    // What backward rebuilds, a layer at a time, and the gradients in flight.
    st.working_bytes = b * ((full ? largest : rebuilt) + in_flight);
    // What a chunk hands on, the largest of this stage's (the last virtual stage hands on nothing).
    for (int64_t v = s; v < static_cast<int64_t>(cut.size()) - 1; v += l.pp)
      st.boundary_bytes = std::max(st.boundary_bytes, b * model.layers[static_cast<size_t>(cut[v].last) - 1].output_bytes);
  }
  return stages;
}

}  // namespace

std::vector<parallel::PieceRange> listed_stage_layers(const ModelDescription& model, const Layout& l) {
  std::vector<double> parameters;
  for (const LayerCosts& layer : model.layers) parameters.push_back(layer.parameters);
  return parallel::balanced_stages(std::vector<bool>(model.layers.size(), true), parameters,
                                   static_cast<int>(l.pp * l.chunks));
}

std::vector<StageWork> stage_work(const ModelDescription& model, const Cluster& cluster, const Layout& layout,
                                  const Workload& workload) {
  if (model.transformer) return gpt_stages(*model.transformer, cluster, layout, workload);
  return listed_stages(model, cluster, layout, workload);
}

}  // namespace artel::plan
