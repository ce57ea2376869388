#include "artel/parallel/ps_shard_plan.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "artel/core/error.h"

namespace artel::parallel {

std::vector<PsPlacement> plan_ps_shards(const std::vector<std::pair<std::string, int64_t>>& params, int servers,
                                        int64_t split_threshold) {
  ARTEL_CHECK(servers >= 1, "a parameter server needs at least one server, got ", servers);
  ARTEL_CHECK(split_threshold >= 1, "the split threshold must be >= 1 element, got ", split_threshold);
  std::set<std::string> names;
  for (const auto& [name, numel] : params) {
    ARTEL_CHECK(numel >= 0, "parameter '", name, "' has a negative size ", numel);
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
    for (int s = 0; s < servers; ++s) {  // near-equal contiguous parts, the first ones one larger
      const int64_t begin = n * s / servers, end = n * (s + 1) / servers;
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
