#include "artel/plan/measured_costs.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>

#include "artel/autograd/ops.h"
#include "artel/comm/thread_group.h"
#include "artel/core/error.h"
#include "artel/core/memory_stats.h"
#include "artel/core/threads.h"
#include "artel/kernels/gemm.h"
#include "artel/parallel/model_shard.h"
#include "artel/parallel/tensor_parallel.h"

namespace artel::plan {

namespace {

double bytes_of(const nn::Activations& a) {
  double sum = 0;
  for (const autograd::Variable& v : a) sum += static_cast<double>(v.value().nbytes());
  return sum;
}

// The parameters of the piece's modules that no earlier piece counted.
double new_parameters(const nn::Piece& piece, const nn::NamedParameters& all, std::set<std::string>& counted) {
  double sum = 0;
  for (const auto& [name, p] : all)
    for (const std::string& module : piece.modules)
      if (nn::path_within(name, module) && counted.insert(name).second) sum += static_cast<double>(p.value().numel());
  return sum;
}

void add_into(LayerCosts& to, const LayerCosts& from) {
  to.forward_flops += from.forward_flops;
  to.parameters += from.parameters;
  to.activation_bytes += from.activation_bytes;
  to.stream_bytes += from.stream_bytes;
  to.backward_stream_bytes += from.backward_stream_bytes;
  to.tensor_parallel_bytes += from.tensor_parallel_bytes;
  to.tensor_parallel_collectives += from.tensor_parallel_collectives;
  to.recomputed_activation_bytes += from.recomputed_activation_bytes;
  to.recomputed_forward_flops += from.recomputed_forward_flops;
}

// Each piece's costs on `input`, run once in order with the graph recorded.
// `settle` runs around each read of the live tensor bytes: alone nothing;
// over a tensor-parallel group a barrier, so that between two reads all
// `ranks` ranks have run the piece and the growth, the process's, divided
// by `ranks` is their mean.
std::vector<LayerCosts> piece_costs(nn::Model& model, const nn::NamedParameters& params, const Tensor& input,
                                    const std::function<void()>& settle, double ranks) {
  const std::vector<nn::Piece>& pieces = model.plan().pieces;
  const double samples = static_cast<double>(input.size(0));
  std::set<std::string> counted;
  std::vector<LayerCosts> costs;
  nn::Activations in{autograd::Variable(input)};
  for (size_t i = 0; i < pieces.size(); ++i) {
    settle();
    const int64_t live = live_tensor_bytes();
    settle();
    nn::Activations out;
    double flops = 0, sent = 0, collectives = 0;
    {
      kernels::ProductFlops products;
      parallel::TensorParallelTraffic traffic;
      out = model.run_pieces(i, i + 1, in);
      flops = products.flops(), sent = traffic.bytes(), collectives = static_cast<double>(traffic.collectives());
    }
    in = out;  // the input let go: what still holds it is what backward needs
    out.clear();
    settle();
    const double grown = static_cast<double>(live_tensor_bytes() - live) / ranks;
    settle();
    costs.push_back({.name = pieces[i].name,
                     .forward_flops = flops / samples,
                     .parameters = new_parameters(pieces[i], params, counted),
                     .activation_bytes = std::max(0.0, grown) / samples,
                     .output_bytes = bytes_of(in) / samples,
                     .tensor_parallel_bytes = sent / samples,
                     .tensor_parallel_collectives = collectives});
  }
  return costs;
}

// The pieces' costs as layers: a piece that is not a layer is added to its
// neighbouring layer, the one whose pipeline stage runs it.
std::vector<LayerCosts> as_layers(const std::vector<LayerCosts>& pieces, const std::vector<nn::Piece>& plan) {
  std::vector<LayerCosts> layers;
  std::optional<LayerCosts> before_first;  // non-layer pieces ahead of the first layer
  for (size_t i = 0; i < pieces.size(); ++i) {
    const LayerCosts& c = pieces[i];
    if (plan[i].layer) {
      layers.push_back(c);
      if (before_first) add_into(layers.back(), *before_first), before_first.reset();
    } else if (!layers.empty()) {
      add_into(layers.back(), c);
      layers.back().output_bytes = c.output_bytes;  // what the layer's stage now hands on
    } else if (before_first) {
      add_into(*before_first, c);
    } else {
      before_first = c;
    }
  }
  return layers;
}

// The sum of a piece's outputs that want a gradient, where its backward
// starts; none when nothing does.
std::optional<autograd::Variable> summed(const nn::Activations& out) {
  std::optional<autograd::Variable> total;
  for (const autograd::Variable& o : out)
    if (o.requires_grad()) total = total ? autograd::add(*total, autograd::sum(o)) : autograd::sum(o);
  return total;
}

// A piece's outputs as the next piece's inputs on their own: leaves, the
// float ones wanting a gradient, so each piece's backward is its own.
nn::Activations as_leaves(const nn::Activations& out) {
  nn::Activations in;
  for (const autograd::Variable& o : out) in.emplace_back(o.value(), o.value().dtype() == DType::f32);
  return in;
}

// Each piece's backward FLOPs (per sample, as forward_flops): the piece run
// on its input, made a leaf that wants a gradient, and the sum of its
// outputs back-propagated.
std::vector<LayerCosts> piece_backward_flops(nn::Model& model, const Tensor& input) {
  const std::vector<nn::Piece>& pieces = model.plan().pieces;
  const double samples = static_cast<double>(input.size(0));
  std::vector<LayerCosts> costs;
  nn::Activations in{autograd::Variable(input)};
  for (size_t i = 0; i < pieces.size(); ++i) {
    nn::Activations out = model.run_pieces(i, i + 1, in);
    const std::optional<autograd::Variable> total = summed(out);
    double flops = 0;
    {
      kernels::ProductFlops products;
      if (total) total->backward();
      flops = products.flops();
    }
    costs.push_back({.name = pieces[i].name, .forward_flops = flops / samples});
    in = as_leaves(out);
  }
  return costs;
}

// Each piece's seconds outside its matrix products, per sample, in forward
// (as stream_bytes) and in backward (as backward_stream_bytes): the piece
// run on its input, made a leaf that wants a gradient, then the sum of its
// outputs back-propagated, at one thread; the fastest of a few rounds (the
// first allocates what the later ones reuse).
std::vector<LayerCosts> piece_stream_seconds(nn::Model& model, const Tensor& input) {
  constexpr int kRounds = 3;
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  const std::vector<nn::Piece>& pieces = model.plan().pieces;
  const double samples = static_cast<double>(input.size(0));
  const int threads = num_threads();
  set_num_threads(1);
  std::vector<LayerCosts> costs(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i)
    costs[i] = {.name = pieces[i].name, .stream_bytes = 1e300, .backward_stream_bytes = 1e300};
  for (int round = 0; round < kRounds; ++round) {
    nn::Activations in{autograd::Variable(input)};
    for (size_t i = 0; i < pieces.size(); ++i) {
      nn::Activations out;
      {
        kernels::ProductFlops products;
        const Clock::time_point start = Clock::now();
        out = model.run_pieces(i, i + 1, in);
        costs[i].stream_bytes = std::min(costs[i].stream_bytes, std::max(0.0, since(start) - products.seconds()) / samples);
      }
      if (const std::optional<autograd::Variable> total = summed(out)) {
        kernels::ProductFlops products;
        const Clock::time_point start = Clock::now();
        total->backward();
        costs[i].backward_stream_bytes =
            std::min(costs[i].backward_stream_bytes, std::max(0.0, since(start) - products.seconds()) / samples);
      } else {
        costs[i].backward_stream_bytes = 0;
      }
      in = as_leaves(out);
    }
  }
  set_num_threads(threads);
  return costs;
}

// What selective recomputation changes in each layer: what it keeps less,
// and the FLOPs its backward runs more (the core's forward, again).
void add_selective_costs(ModelDescription& m, const DeclareModel& declare, const Tensor& input, uint64_t seed) {
  std::unique_ptr<nn::Model> model = declare();
  nn::materialize(*model, seed);
  const std::vector<nn::Piece>& pieces = model->plan().pieces;
  const std::vector<LayerCosts> none = as_layers(piece_backward_flops(*model, input), pieces);
  model->set_recompute(nn::Recompute::selective);
  const std::vector<LayerCosts> kept =
      as_layers(piece_costs(*model, model->named_parameters(), input, [] {}, 1), pieces);
  const std::vector<LayerCosts> rerun = as_layers(piece_backward_flops(*model, input), pieces);
  for (size_t i = 0; i < m.layers.size(); ++i) {
    LayerCosts& l = m.layers[i];
    l.recomputed_activation_bytes = std::clamp(l.activation_bytes - kept[i].activation_bytes, 0.0, l.activation_bytes);
    l.recomputed_forward_flops = std::max(0.0, rerun[i].forward_flops - none[i].forward_flops);
  }
}

// The degrees the plan's tensor-parallel rules divide the model into.
std::vector<int64_t> split_degrees(const DeclareModel& declare) {
  constexpr int64_t kMostRanks = 64;  // Megatron's groups stay within a host's 8; 64 is far past any
  std::vector<int64_t> degrees;
  if (declare()->plan().tensor_parallel.empty()) return degrees;
  for (int64_t t = 2; t <= kMostRanks; ++t) {
    std::unique_ptr<nn::Model> model = declare();
    try {
      parallel::ModelShard(*model, {.tp_degree = static_cast<int>(t)});
      degrees.push_back(t);
    } catch (const Error&) {  // the rules do not divide the model by t
    }
  }
  return degrees;
}

// Each layer's work outside the products (piece_stream_seconds), as bytes
// at the timing's rate.
void add_stream_costs(ModelDescription& m, nn::Model& model, const StreamTiming& timing) {
  const std::vector<LayerCosts> seconds = as_layers(piece_stream_seconds(model, timing.batch), model.plan().pieces);
  for (size_t i = 0; i < m.layers.size(); ++i) {
    m.layers[i].stream_bytes = seconds[i].stream_bytes * timing.bytes_per_second;
    m.layers[i].backward_stream_bytes = seconds[i].backward_stream_bytes * timing.bytes_per_second;
  }
}

// One rank of a group of t, measured: the layers' costs on rank 0.
std::vector<LayerCosts> rank_costs(const DeclareModel& declare, const Tensor& input, uint64_t seed, int t) {
  std::vector<LayerCosts> rank;
  comm::spawn_threads(t, [&](comm::ProcessGroup& group) {
    std::unique_ptr<nn::Model> model = declare();
    parallel::ModelShard shard(*model, {.tp = &group});
    shard.materialize(seed);
    auto settle = [&group] { group.barrier()->wait(); };
    // Once to warm the group (what its first collectives allocate stays), then measured.
    piece_costs(*model, shard.parameters(), input, settle, t);
    std::vector<LayerCosts> layers =
        as_layers(piece_costs(*model, shard.parameters(), input, settle, t), model->plan().pieces);
    if (group.rank() == 0) rank = std::move(layers);
  });
  return rank;
}

// The degrees the model's tensor-parallel rules divide it into, and each
// layer's split parts.
// A cost that splits is c₁ = w + s whole and w + s/t on one of t ranks,
// so one group gives s = (c₁ − c_t)·t/(t − 1). Activations may also grow
// by e under any tp (a row layer's partial sum, where an op's backward reads it):
// c_t = w + s/t + e, which a second group size separates from s.
void add_tensor_parallel_costs(ModelDescription& m, const DeclareModel& declare, const Tensor& input, uint64_t seed) {
  m.tensor_parallel_degrees = split_degrees(declare);
  const std::vector<int64_t>& degrees = m.tensor_parallel_degrees;
  if (degrees.empty()) return;
  const double t0 = static_cast<double>(degrees[0]);
  const std::vector<LayerCosts> rank = rank_costs(declare, input, seed, static_cast<int>(t0));
  const std::vector<LayerCosts> second =
      degrees.size() > 1 ? rank_costs(declare, input, seed, static_cast<int>(degrees[1])) : std::vector<LayerCosts>{};
  auto split = [t0](double whole, double one) { return std::clamp((whole - one) * t0 / (t0 - 1), 0.0, whole); };
  for (size_t i = 0; i < m.layers.size(); ++i) {
    LayerCosts& l = m.layers[i];
    l.split_forward_flops = split(l.forward_flops, rank[i].forward_flops);
    l.split_parameters = split(l.parameters, rank[i].parameters);
    double s = split(l.activation_bytes, rank[i].activation_bytes);
    if (!second.empty()) {
      const double t1 = static_cast<double>(degrees[1]);
      s = std::clamp((rank[i].activation_bytes - second[i].activation_bytes) / (1 / t0 - 1 / t1), 0.0, l.activation_bytes);
    }
    l.split_activation_bytes = s;
    l.tensor_parallel_activation_bytes = std::max(0.0, rank[i].activation_bytes - (l.activation_bytes - s) - s / t0);
    l.tensor_parallel_bytes = rank[i].tensor_parallel_bytes;
    l.tensor_parallel_collectives = rank[i].tensor_parallel_collectives;
  }
}

}  // namespace

ModelDescription measure_model_costs(const std::string& name, nn::Model& model, const Tensor& input) {
  ARTEL_CHECK(input.dim() >= 1 && input.size(0) >= 1, "measuring ", name, "'s costs needs a batch of at least one sample");
  ModelDescription m{.name = name, .transformer = std::nullopt, .layers = {}};
  m.layers = as_layers(piece_costs(model, model.named_parameters(), input, [] {}, 1), model.plan().pieces);
  ARTEL_CHECK(!m.layers.empty(), name, " declares no layer piece, so a pipeline has nothing to cut between",
              " (nn::Piece::layer)");
  return m;
}

ModelDescription measure_model_costs(const std::string& name, const DeclareModel& declare, const Tensor& input,
                                     uint64_t seed, const MeasuredParts& parts) {
  std::unique_ptr<nn::Model> whole = declare();
  nn::materialize(*whole, seed);
  ModelDescription m = measure_model_costs(name, *whole, input);
  if (parts.timing) add_stream_costs(m, *whole, *parts.timing);
  whole.reset();
  if (parts.selective) add_selective_costs(m, declare, input, seed);
  if (parts.tensor_parallel) add_tensor_parallel_costs(m, declare, input, seed);
  return m;
}

nlohmann::ordered_json model_costs_json(const ModelDescription& m, const std::string& source) {
  const bool splits = !m.tensor_parallel_degrees.empty();
  const bool streams = std::any_of(m.layers.begin(), m.layers.end(), [](const LayerCosts& l) { return l.stream_bytes > 0; });
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (const LayerCosts& l : m.layers) {
    nlohmann::ordered_json j = {{"name", l.name},
                                {"forward_flops", l.forward_flops},
                                {"parameters", l.parameters},
                                {"activation_bytes", l.activation_bytes},
                                {"output_bytes", l.output_bytes}};
    if (streams) j.update({{"stream_bytes", l.stream_bytes}, {"backward_stream_bytes", l.backward_stream_bytes}});
    if (m.recomputes_selectively())
      j.update({{"recomputed_activation_bytes", l.recomputed_activation_bytes},
                {"recomputed_forward_flops", l.recomputed_forward_flops}});
    if (splits)
      j.update({{"split_forward_flops", l.split_forward_flops},
                {"split_parameters", l.split_parameters},
                {"split_activation_bytes", l.split_activation_bytes},
                {"tensor_parallel_activation_bytes", l.tensor_parallel_activation_bytes},
                {"tensor_parallel_bytes", l.tensor_parallel_bytes},
                {"tensor_parallel_collectives", l.tensor_parallel_collectives}});
    layers.push_back(std::move(j));
  }
  nlohmann::ordered_json j = {{"name", m.name}, {"source", source}};
  if (splits) j["tensor_parallel_degrees"] = m.tensor_parallel_degrees;
  j["layers"] = std::move(layers);
  return j;
}

}  // namespace artel::plan
