// What `artel plan` prints: one prediction as a breakdown of step time and
// memory per worker, a search as a ranked table with a "fits" column, and
// both as JSON for tools.
//
//   std::cout << prediction_text(p, model, workload);
//   std::cout << ranking_text(ranked, /*top=*/20);
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "artel/plan/step_model.h"

namespace artel::plan {

std::string prediction_text(const Prediction& p, const ModelDescription& model, const Cluster& cluster,
                            const Workload& workload);
std::string ranking_text(const std::vector<Prediction>& ranked, size_t top);

// The layout's degrees and choices, and its stages' layers ("layers_per_stage":
// [[first, last), ...]: a GPT's blocks evenly, listed layers as listed_stage_layers
// cuts them; left out under the interleaved schedule, whose stages hold several runs).
nlohmann::ordered_json layout_json(const Layout& l, const ModelDescription& model, const Workload& w);
nlohmann::ordered_json prediction_json(const Prediction& p, const ModelDescription& model, const Workload& w);
nlohmann::ordered_json ranking_json(const std::vector<Prediction>& ranked, const ModelDescription& model,
                                    const Workload& w, size_t top);

}  // namespace artel::plan
