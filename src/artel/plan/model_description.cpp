#include "artel/plan/model_description.h"

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

double layer_cost(const nlohmann::json& layer, const char* key, const std::string& where) {
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
  check_json_keys(j, {"name", "description", "source", "layers"}, origin, kFormat);
  ModelDescription m;
  m.name = json_string_or(j, "name", "model", origin);
  for (const char* prose : {"description", "source"}) json_string_or(j, prose, "", origin);  // read by people only, but strings
  for (size_t i = 0; i < j["layers"].size(); ++i) {
    const nlohmann::json& l = j["layers"][i];
    const std::string where = detail::concat(origin, ": layers[", i, "]");
    ARTEL_CHECK(l.is_object(), where, " must be an object");
    check_json_keys(l, {"name", "forward_flops", "parameters", "activation_bytes", "output_bytes"}, where, kFormat);
    m.layers.push_back({.name = json_string_or(l, "name", detail::concat("layer", i), where),
                        .forward_flops = layer_cost(l, "forward_flops", where),
                        .parameters = layer_cost(l, "parameters", where),
                        .activation_bytes = layer_cost(l, "activation_bytes", where),
                        .output_bytes = layer_cost(l, "output_bytes", where)});
  }
  return m;
}

ModelDescription read_model_costs(const std::string& path) {
  return parse_model_costs(read_json_file(path, "model-costs file", "check the path passed to --model-costs",
                                          "see docs/PLAN.md for the model-costs format"),
                           path);
}

}  // namespace artel::plan
