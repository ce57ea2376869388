#include "artel/train/trace_phases.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "artel/train/train_bench.h"

namespace artel::train {
namespace {

// "send to rank 1 tag 7" -> "send to rank 1": a pipeline's tags number its
// micro-batches, which would make each message a phase of its own.
std::string without_tag(const std::string& name) {
  const size_t at = name.rfind(" tag ");
  return at == std::string::npos ? name : name.substr(0, at);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string number(double v, const char* format) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

}  // namespace

std::vector<PhaseTimes> trace_phases(const std::vector<RankTrace>& ranks, int64_t first_step) {
  std::vector<PhaseTimes> out;
  for (const RankTrace& r : ranks) {
    PhaseTimes p{.rank = r.rank, .first_step = first_step};
    // (track, name) -> step -> (ns, events); tracks and names in order of first appearance
    std::vector<std::string> tracks;
    std::map<std::string, std::vector<std::string>> names;
    std::map<std::pair<std::string, std::string>, std::map<int64_t, std::pair<int64_t, int64_t>>> per_step;
    std::set<int64_t> steps;
    for (const trace::Event& e : r.events) {
      if (e.step < first_step || e.step < 0) continue;
      steps.insert(e.step);
      const std::string name = without_tag(e.name);
      if (!names.count(e.track)) tracks.push_back(e.track);
      std::vector<std::string>& seen = names[e.track];
      if (std::find(seen.begin(), seen.end(), name) == seen.end()) seen.push_back(name);
      auto& [ns, events] = per_step[{e.track, name}][e.step];
      ns += e.dur_ns, ++events;
    }
    if (!steps.empty()) p.last_step = *steps.rbegin(), p.first_step = *steps.begin();
    for (const std::string& track : tracks) {
      TrackPhases t{.track = track};
      for (const std::string& name : names[track]) {
        std::vector<double> ms;
        int64_t events = 0;
        for (const auto& [step, sum] : per_step[{track, name}]) ms.push_back(sum.first / 1e6), events += sum.second;
        t.phases.push_back({name, median(ms), static_cast<double>(events) / static_cast<double>(steps.size())});
      }
      p.tracks.push_back(std::move(t));
    }
    out.push_back(std::move(p));
  }
  return out;
}

int64_t first_counted_step(const std::vector<RankTrace>& ranks) {
  int64_t lo = -1, hi = -1;
  for (const RankTrace& r : ranks)
    for (const trace::Event& e : r.events) {
      if (e.step < 0) continue;
      lo = lo < 0 ? e.step : std::min(lo, e.step);
      hi = std::max(hi, e.step);
    }
  if (lo < 0) return 0;
  return lo + warmup_steps(hi - lo + 1);
}

std::string phases_table(const std::vector<PhaseTimes>& phases) {
  int64_t first = -1, last = -1;
  for (const PhaseTimes& p : phases) {
    if (p.last_step < p.first_step) continue;
    first = first < 0 ? p.first_step : std::min(first, p.first_step);
    last = std::max(last, p.last_step);
  }
  if (last < 0) return "";
  std::string s = "step phases, median ms a step over steps " + std::to_string(first) + "-" + std::to_string(last) +
                  " (count a step where not 1):\n";
  for (const PhaseTimes& p : phases)
    for (const TrackPhases& t : p.tracks) {
      s.append("  rank ").append(std::to_string(p.rank)).append(" ").append(t.track).append(":");
      for (size_t i = 0; i < t.phases.size(); ++i) {
        const PhaseTime& ph = t.phases[i];
        s.append(i ? ", " : " ").append(ph.name).append(" ").append(number(ph.median_ms, "%.3f"));
        const std::string count = number(ph.count, ph.count < 10 ? "%.2g" : "%.0f");
        if (count != "1") s.append(" x").append(count);
      }
      s.append("\n");
    }
  return s;
}

}  // namespace artel::train
