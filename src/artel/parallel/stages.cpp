#include "artel/parallel/stages.h"

#include <algorithm>
#include <limits>

#include "artel/core/error.h"

namespace artel::parallel {
namespace {

// Units: each layer with the non-layer pieces attached to it. unit_first[u]
// is the first piece of unit u; the last unit runs to the end.
std::vector<int64_t> unit_starts(const std::vector<bool>& is_layer) {
  std::vector<int64_t> starts;
  for (size_t i = 0; i < is_layer.size(); ++i)
    if (is_layer[i]) starts.push_back(starts.empty() ? 0 : static_cast<int64_t>(i));
  return starts;
}

void check_stage_count(int64_t layers, int stages) {
  if (layers == 0 && stages > 1)
    throw Error(detail::concat("pipeline: ", stages, " stages for a model that declares no layer pieces to cut"),
                "give the model a plan (set_plan with nn::layer_piece for each layer), or use --pp 1");
  if (stages < 1 || stages > layers)
    throw Error(detail::concat("pipeline: ", stages, " stages for a model of ", layers, " layers"),
                "every stage needs at least one layer (a GPT block): use --pp between 1 and the layer count");
}

std::vector<PieceRange> ranges_from_cuts(const std::vector<int64_t>& starts, const std::vector<int64_t>& cuts,
                                         int64_t pieces) {
  // cuts: unit index where each stage after the first begins.
  std::vector<PieceRange> out;
  int64_t first = 0;
  for (int64_t c : cuts) {
    out.push_back({first, starts[static_cast<size_t>(c)]});
    first = starts[static_cast<size_t>(c)];
  }
  out.push_back({first, pieces});
  return out;
}

}  // namespace

std::vector<PieceRange> balanced_stages(const std::vector<bool>& is_layer, const std::vector<double>& costs,
                                        int stages) {
  ARTEL_CHECK(is_layer.size() == costs.size(), "balanced_stages: ", is_layer.size(), " pieces, ", costs.size(), " costs");
  const std::vector<int64_t> starts = unit_starts(is_layer);
  const int64_t U = static_cast<int64_t>(starts.size()), n = static_cast<int64_t>(costs.size());
  check_stage_count(U, stages);
  std::vector<double> unit(U, 0.0);
  for (int64_t u = 0; u < U; ++u) {
    const int64_t end = u + 1 < U ? starts[u + 1] : n;
    for (int64_t i = starts[u]; i < end; ++i) unit[u] += costs[i];
  }
  // best[s][b]: the smallest largest-stage cost of stages 0..s-1 holding units [0, b).
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(U + 1, inf));
  std::vector<std::vector<int64_t>> cut(stages + 1, std::vector<int64_t>(U + 1, 0));
  best[0][0] = 0;
  for (int s = 1; s <= stages; ++s)
    for (int64_t b = s; b <= U; ++b) {
      double sum = 0;
      for (int64_t a = b - 1; a >= s - 1; --a) {
        sum += unit[a];
        if (best[s - 1][a] == inf) continue;
        const double worst = std::max(best[s - 1][a], sum);
        if (worst <= best[s][b]) best[s][b] = worst, cut[s][b] = a;  // ties: the earliest cut
      }
    }
  std::vector<int64_t> cuts(stages - 1);
  for (int64_t s = stages, b = U; s > 1; --s) {
    b = cut[s][b];
    cuts[s - 2] = b;
  }
  return ranges_from_cuts(starts, cuts, n);
}

std::vector<PieceRange> explicit_stages(const std::vector<bool>& is_layer, const std::vector<int64_t>& layers_per_stage) {
  const std::vector<int64_t> starts = unit_starts(is_layer);
  const int64_t U = static_cast<int64_t>(starts.size());
  check_stage_count(U, static_cast<int>(layers_per_stage.size()));
  std::vector<int64_t> cuts;
  int64_t next = 0;
  for (size_t s = 0; s < layers_per_stage.size(); ++s) {
    const int64_t n = layers_per_stage[s];
    if (n < 1)
      throw Error(detail::concat("pipeline: stage ", s, " is given ", n, " layers"),
                  "every stage of --stage-layers needs at least one layer");
    if (s > 0 && next < U) cuts.push_back(next);
    next += n;
  }
  if (next != U)
    throw Error(detail::concat("pipeline: --stage-layers add up to ", next, " layers, the model has ", U),
                "give one count per stage, summing to the model's layers (a GPT's --n-layer)");
  return ranges_from_cuts(starts, cuts, static_cast<int64_t>(is_layer.size()));
}

std::vector<PieceRange> layers_of(const std::vector<bool>& is_layer, const std::vector<PieceRange>& stages) {
  std::vector<PieceRange> out;
  int64_t before = 0;
  for (const PieceRange& r : stages) {
    int64_t n = 0;
    for (int64_t i = r.first; i < r.last; ++i) n += is_layer[static_cast<size_t>(i)];
    out.push_back({before, before + n});
    before += n;
  }
  return out;
}

std::string stage_runs(const std::vector<PieceRange>& ranges, int stages, int stage) {
  std::string s;
  for (size_t v = static_cast<size_t>(stage); v < ranges.size(); v += static_cast<size_t>(stages)) {
    s.append(s.empty() ? "[" : "+[").append(std::to_string(ranges[v].first)).append(",");
    s.append(std::to_string(ranges[v].last)).append(")");
  }
  return s;
}

}  // namespace artel::parallel
