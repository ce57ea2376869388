#include "artel/plan/layout_search.h"

#include <algorithm>

#include "artel/core/error.h"

namespace artel::plan {

namespace {

// In increasing order. Pairs d, n/d up to √n: a global batch of 2·10⁹ took
// minutes counting to n for every (tp, pp).
std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> low, high;
  for (int64_t d = 1; d <= n / d; ++d) {
    if (n % d != 0) continue;
    low.push_back(d);
    if (d != n / d) high.push_back(n / d);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

bool is_valid(const ModelDescription& model, const Layout& l, const Workload& w, int64_t workers) {
  try {
    validate_layout(model, l, w, workers);
    return true;
  } catch (const Error&) {
    return false;
  }
}

// The schedule variants of a pipeline: one (1f1b) without one.
std::vector<std::pair<Schedule, int64_t>> schedules_for(const ModelDescription& model, const Layout& l,
                                                        const SearchSpace& space) {
  std::vector<std::pair<Schedule, int64_t>> out;
  for (Schedule s : space.schedules) {
    if (l.pp == 1) {
      if (s == Schedule::one_f_one_b) out.push_back({s, 1});
    } else if (s != Schedule::interleaved) {
      out.push_back({s, 1});
    } else {
      for (int64_t v : divisors(model.pipeline_layers() / l.pp)) {
        if (v >= 2) out.push_back({s, v});
      }
    }
  }
  if (l.pp == 1 && out.empty()) out.push_back({Schedule::one_f_one_b, 1});
  return out;
}

}  // namespace

std::vector<Layout> enumerate_layouts(const ModelDescription& model, int64_t workers, const Workload& workload,
                                      const SearchSpace& space) {
  std::vector<Layout> out;
  for (int64_t tp : divisors(workers)) {
    for (int64_t pp : divisors(workers / tp)) {
      const int64_t dp = workers / tp / pp;
      if (workload.global_batch % dp != 0) continue;
      for (int64_t m : divisors(workload.global_batch / dp)) {
        if (m > space.max_micro_batches) break;
        Layout base{.dp = dp, .tp = tp, .pp = pp, .micro_batches = m};
        for (auto [schedule, chunks] : schedules_for(model, base, space)) {
          for (int zero : space.zero_stages) {
            for (Recompute r : space.recompute) {
              for (bool sp : space.sequence_parallel) {
                if (sp && tp == 1) continue;
                for (const Compression& c : space.compressions) {
                  if (dp == 1 && c.kind != Compression::Kind::none) continue;
                  Layout l = base;
                  l.schedule = schedule;
                  l.chunks = chunks;
                  l.zero = zero;
                  l.recompute = r;
                  l.sequence_parallel = sp;
                  l.compression = c;
                  if (dp == 1 && zero != 0) continue;  // nothing to shard over
                  if (is_valid(model, l, workload, workers)) out.push_back(l);
                }
              }
            }
          }
        }
      }
    }
  }
  return out;
}

std::vector<Prediction> search_layouts(const ModelDescription& model, const Cluster& cluster, const Workload& workload,
                                       const SearchSpace& space) {
  std::vector<Prediction> out;
  for (const Layout& l : enumerate_layouts(model, cluster.workers(), workload, space)) {
    out.push_back(predict(model, cluster, l, workload));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Prediction& a, const Prediction& b) { return a.time.step < b.time.step; });
  return out;
}

}  // namespace artel::plan
