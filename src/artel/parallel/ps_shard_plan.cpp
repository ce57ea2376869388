#include "artel/parallel/ps_shard_plan.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "artel/core/error.h"

namespace artel::parallel {

std::vector<PsPlacement> plan_ps_shards(const std::vector<std::pair<std::string, int64_t>>& params, int servers,
                                        int64_t split_threshold, const std::vector<int64_t>& units) {
  ARTEL_CHECK(servers >= 1, "a parameter server needs at least one server, got ", servers);
  ARTEL_CHECK(split_threshold >= 1, "the split threshold must be >= 1 element, got ", split_threshold);
  ARTEL_CHECK(units.empty() || units.size() == params.size(), units.size(), " units for ", params.size(),
              " parameters");
  auto unit_of = [&](size_t i) { return units.empty() ? int64_t{1} : units[i]; };
  std::set<std::string> names;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& [name, numel] = params[i];
    ARTEL_CHECK(numel >= 0, "parameter '", name, "' has a negative size ", numel);
    ARTEL_CHECK(unit_of(i) >= 1 && numel % unit_of(i) == 0, "parameter '", name, "' of ", numel,
                " elements cannot be cut in units of ", unit_of(i));
    ARTEL_CHECK(names.insert(name).second, "parameter '", name, "' appears twice");
  }
  std::vector<PsPlacement> plan(params.size());
  std::vector<int64_t> load(static_cast<size_t>(servers), 0);
  std::vector<size_t> small;
  for (size_t i = 0; i < params.size(); ++i) {
    plan[i].name = params[i].first;
    const int64_t n = params[i].second;
    if (n < split_threshold || servers == 1) {
      small.push_back(i);
      continue;
    }
    const int64_t unit = unit_of(i), units_n = n / unit;
    for (int s = 0; s < servers; ++s) {  // near-equal contiguous parts of whole units
      const int64_t begin = units_n * s / servers * unit, end = units_n * (s + 1) / servers * unit;
      plan[i].parts.push_back({s, begin, end});
      load[static_cast<size_t>(s)] += end - begin;
    }
  }
  // Largest first (ties: model order), each onto the least loaded server.
  std::stable_sort(small.begin(), small.end(),
                   [&](size_t a, size_t b) { return params[a].second > params[b].second; });
  for (size_t i : small) {
    const auto least = std::min_element(load.begin(), load.end());
    plan[i].parts.push_back({static_cast<int>(least - load.begin()), 0, params[i].second});
    *least += params[i].second;
  }
  return plan;
}

std::vector<int64_t> ps_server_elements(const std::vector<PsPlacement>& plan, int servers) {
  std::vector<int64_t> elements(static_cast<size_t>(std::max(servers, 0)), 0);
  for (const PsPlacement& p : plan)
    for (const PsPart& part : p.parts) elements.at(static_cast<size_t>(part.server)) += part.end - part.begin;
  return elements;
}

}  // namespace artel::parallel
