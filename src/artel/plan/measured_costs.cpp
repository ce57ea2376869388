#include "artel/plan/measured_costs.h"

#include <set>

#include "artel/core/error.h"
#include "artel/core/memory_stats.h"
#include "artel/kernels/gemm.h"

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
}

}  // namespace

ModelDescription measure_model_costs(const std::string& name, nn::Model& model, const Tensor& input) {
  const std::vector<nn::Piece>& pieces = model.plan().pieces;
  ARTEL_CHECK(input.dim() >= 1 && input.size(0) >= 1, "measuring ", name, "'s costs needs a batch of at least one sample");
  const double samples = static_cast<double>(input.size(0));
  const nn::NamedParameters params = model.named_parameters();
  std::set<std::string> counted;
  ModelDescription m{.name = name, .transformer = std::nullopt, .layers = {}};
  std::optional<LayerCosts> before_first;  // non-layer pieces ahead of the first layer
  nn::Activations in{autograd::Variable(input)};
  for (size_t i = 0; i < pieces.size(); ++i) {
    const int64_t live = live_tensor_bytes();
    nn::Activations out;
    double flops = 0;
    {
      kernels::ProductFlops products;
      out = model.run_pieces(i, i + 1, in);
      flops = products.flops();
    }
    in = out;  // the input let go: what still holds it is what backward needs
    out.clear();
    const LayerCosts c{.name = pieces[i].name,
                       .forward_flops = flops / samples,
                       .parameters = new_parameters(pieces[i], params, counted),
                       .activation_bytes = std::max(0.0, static_cast<double>(live_tensor_bytes() - live)) / samples,
                       .output_bytes = bytes_of(in) / samples};
    if (pieces[i].layer) {
      m.layers.push_back(c);
      if (before_first) add_into(m.layers.back(), *before_first), before_first.reset();
    } else if (!m.layers.empty()) {
      add_into(m.layers.back(), c);
      m.layers.back().output_bytes = c.output_bytes;  // what the layer's stage now hands on
    } else if (before_first) {
      add_into(*before_first, c);
    } else {
      before_first = c;
    }
  }
  ARTEL_CHECK(!m.layers.empty(), name, " declares no layer piece, so a pipeline has nothing to cut between",
              " (nn::Piece::layer)");
  return m;
}

nlohmann::ordered_json model_costs_json(const ModelDescription& m, const std::string& source) {
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (const LayerCosts& l : m.layers)
    layers.push_back({{"name", l.name},
                      {"forward_flops", l.forward_flops},
                      {"parameters", l.parameters},
                      {"activation_bytes", l.activation_bytes},
                      {"output_bytes", l.output_bytes}});
  return {{"name", m.name}, {"source", source}, {"layers", layers}};
}

}  // namespace artel::plan
