#include "artel/plan/model_description.h"

#include <tuple>

#include "artel/core/error.h"
#include "artel/core/json_file.h"

namespace artel::plan {

int64_t ModelDescription::pipeline_layers() const {
  return transformer ? transformer->n_layer : static_cast<int64_t>(layers.size());
}

double ModelDescription::parameters() const {
  if (transformer) return total_parameters(*transformer);
  double sum = 0;
  for (const LayerCosts& l : layers) sum += l.parameters;
  return sum;
}

bool ModelDescription::recomputes_selectively() const {
  for (const LayerCosts& l : layers)
    if (l.recomputed_forward_flops > 0 || l.recomputed_activation_bytes > 0) return true;
  return false;
}

ModelDescription transformer_model(const std::string& name, const TransformerShape& shape) {
  shape.validate();
  return {.name = name, .transformer = shape, .layers = {}};
}

namespace {

// 10^18 parameters, FLOPs or bytes in one layer is beyond any model (GPT-3's
// layers: 2·10^9 parameters): a larger number is a typing slip, and would
// overflow the planner's sums into nonsense.
constexpr double kMaxLayerCost = 1e18;

constexpr const char* kFormat = "docs/PLAN.md";

double layer_cost(const nlohmann::json& layer, const char* key, const std::string& where, bool optional = false) {
  if (optional && !layer.contains(key)) return 0;
  ARTEL_CHECK(layer.contains(key) && layer[key].is_number(), where, ": needs a number \"", key, "\"");
  const double v = layer[key].get<double>();
  ARTEL_CHECK(v >= 0 && v <= kMaxLayerCost, where, ": \"", key, "\" must be in [0, 1e18], got ", v);
  return v;
}

}  // namespace

ModelDescription parse_model_costs(const nlohmann::json& j, const std::string& origin) {
  ARTEL_CHECK(j.is_object(), origin, ": a model-costs file holds one JSON object");
  ARTEL_CHECK(j.contains("layers") && j["layers"].is_array() && !j["layers"].empty(), origin,
              ": needs a non-empty array \"layers\"");
  check_json_keys(j, {"name", "description", "source", "tensor_parallel_degrees", "layers"}, origin, kFormat);
  ModelDescription m;
  m.name = json_string_or(j, "name", "model", origin);
  for (const char* prose : {"description", "source"}) json_string_or(j, prose, "", origin);  // read by people only, but strings
  for (size_t i = 0; i < j["layers"].size(); ++i) {
    const nlohmann::json& l = j["layers"][i];
    const std::string where = detail::concat(origin, ": layers[", i, "]");
    ARTEL_CHECK(l.is_object(), where, " must be an object");
    check_json_keys(l, {"name", "forward_flops", "parameters", "activation_bytes", "output_bytes", "stream_bytes", "backward_stream_bytes",
                        "split_forward_flops", "split_parameters", "split_activation_bytes", "tensor_parallel_activation_bytes",
                        "tensor_parallel_bytes",
                        "tensor_parallel_collectives", "recomputed_activation_bytes", "recomputed_forward_flops"},
                    where, kFormat);
    LayerCosts c{.name = json_string_or(l, "name", detail::concat("layer", i), where),
                 .forward_flops = layer_cost(l, "forward_flops", where),
                 .parameters = layer_cost(l, "parameters", where),
                 .activation_bytes = layer_cost(l, "activation_bytes", where),
                 .output_bytes = layer_cost(l, "output_bytes", where),
                 .stream_bytes = layer_cost(l, "stream_bytes", where, true),
                 .backward_stream_bytes = layer_cost(l, "backward_stream_bytes", where, true),
                 .split_forward_flops = layer_cost(l, "split_forward_flops", where, true),
                 .split_parameters = layer_cost(l, "split_parameters", where, true),
                 .split_activation_bytes = layer_cost(l, "split_activation_bytes", where, true),
                 .tensor_parallel_activation_bytes = layer_cost(l, "tensor_parallel_activation_bytes", where, true),
                 .tensor_parallel_bytes = layer_cost(l, "tensor_parallel_bytes", where, true),
                 .tensor_parallel_collectives = layer_cost(l, "tensor_parallel_collectives", where, true),
                 .recomputed_activation_bytes = layer_cost(l, "recomputed_activation_bytes", where, true),
                 .recomputed_forward_flops = layer_cost(l, "recomputed_forward_flops", where, true)};
    for (const auto& [part, whole, part_key, whole_key] :
         {std::tuple{c.split_forward_flops, c.forward_flops, "split_forward_flops", "forward_flops"},
          std::tuple{c.split_parameters, c.parameters, "split_parameters", "parameters"},
          std::tuple{c.split_activation_bytes, c.activation_bytes, "split_activation_bytes", "activation_bytes"},
          std::tuple{c.recomputed_activation_bytes, c.activation_bytes, "recomputed_activation_bytes",
                     "activation_bytes"}})
      ARTEL_CHECK(part <= whole, where, ": \"", part_key, "\" (", part, ") is more than \"", whole_key, "\" (", whole,
                  "): it is a part of the whole");
    m.layers.push_back(c);
  }
  if (j.contains("tensor_parallel_degrees")) {
    const nlohmann::json& d = j["tensor_parallel_degrees"];
    ARTEL_CHECK(d.is_array(), origin, ": \"tensor_parallel_degrees\" must be an array of integers >= 2, like [2, 4]");
    for (const nlohmann::json& t : d) {
      ARTEL_CHECK(t.is_number_integer() && t.get<int64_t>() >= 2 && t.get<int64_t>() <= 1 << 20, origin,
                  ": \"tensor_parallel_degrees\" holds integers from 2, like [2, 4], got ", t.dump());
      m.tensor_parallel_degrees.push_back(t.get<int64_t>());
    }
  }
  return m;
}

ModelDescription read_model_costs(const std::string& path) {
  return parse_model_costs(read_json_file(path, "model-costs file", "check the path passed to --model-costs",
                                          "see docs/PLAN.md for the model-costs format"),
                           path);
}

}  // namespace artel::plan
