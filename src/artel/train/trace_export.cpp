#include "artel/train/trace_export.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "artel/core/error.h"
#include "artel/core/regular_file.h"

namespace artel::train {
namespace {

using json = nlohmann::json;

json metadata(const char* name, int pid, int tid, json args) {
  return {{"name", name}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

json complete_event(const trace::Event& e, int pid, int tid, int64_t origin_ns) {
  json out = {{"name", e.name}, {"cat", e.category}, {"ph", "X"}, {"pid", pid}, {"tid", tid},
              {"ts", static_cast<double>(e.start_ns - origin_ns) / 1e3}, {"dur", static_cast<double>(e.dur_ns) / 1e3}};
  json args = json::object();
  if (e.step >= 0) args["step"] = e.step;
  if (e.micro_batch >= 0) args["micro_batch"] = e.micro_batch;
  if (!args.empty()) out["args"] = std::move(args);
  return out;
}

// One rank's process: its metadata, then its events, one thread per track.
void append_rank(json& out, const RankTrace& r, int64_t origin_ns) {
  out.push_back(metadata("process_name", r.rank, 0, {{"name", r.label}}));
  out.push_back(metadata("process_sort_index", r.rank, 0, {{"sort_index", r.rank}}));
  std::map<std::string, int> tids;
  for (const auto& e : r.events) {
    auto [it, added] = tids.emplace(e.track, static_cast<int>(tids.size()));
    if (added) {
      out.push_back(metadata("thread_name", r.rank, it->second, {{"name", e.track}}));
      out.push_back(metadata("thread_sort_index", r.rank, it->second, {{"sort_index", it->second}}));
    }
    out.push_back(complete_event(e, r.rank, it->second, origin_ns));
  }
}

bool is_compute(const trace::Event& e) { return e.category == "compute"; }

// [earliest start, latest end] of the compute events of all rows; {0, 0} if none.
std::pair<int64_t, int64_t> compute_window(const std::vector<SvgRow>& rows) {
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  for (const auto& row : rows)
    for (const auto& e : row.events)
      if (is_compute(e)) {
        lo = std::min(lo, e.start_ns);
        hi = std::max(hi, e.start_ns + e.dur_ns);
      }
  if (lo > hi) return {0, 0};
  return {lo, hi};
}

// Length of the union of the row's compute intervals.
int64_t busy_ns(const SvgRow& row) {
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const auto& e : row.events)
    if (is_compute(e) && e.dur_ns > 0) spans.emplace_back(e.start_ns, e.start_ns + e.dur_ns);
  std::sort(spans.begin(), spans.end());
  int64_t total = 0, end = std::numeric_limits<int64_t>::min();
  for (auto [b, e] : spans) {
    if (e <= end) continue;
    total += e - std::max(b, end);
    end = e;
  }
  return total;
}

}  // namespace

std::string chrome_trace_json(const std::vector<RankTrace>& ranks) {
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (const auto& r : ranks)
    for (const auto& e : r.events) origin = std::min(origin, e.start_ns);
  if (origin == std::numeric_limits<int64_t>::max()) origin = 0;
  json events = json::array();
  for (const auto& r : ranks) append_rank(events, r, origin);
  json doc = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  // Names come from user code: replace invalid UTF-8 rather than fail the export.
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

Utilisation utilisation(const std::vector<SvgRow>& rows) {
  auto [lo, hi] = compute_window(rows);
  Utilisation u;
  u.window_start_ns = lo;
  u.window_ms = static_cast<double>(hi - lo) / 1e6;
  for (const auto& row : rows) {
    int64_t busy = busy_ns(row);
    u.busy_ms.push_back(static_cast<double>(busy) / 1e6);
    u.idle_share.push_back(hi > lo ? 1.0 - static_cast<double>(busy) / static_cast<double>(hi - lo) : 0.0);
  }
  return u;
}

std::vector<double> idle_of_unequal_stages(const std::vector<double>& busy_ms, int micro_batches,
                                           parallel::ScheduleKind schedule, int chunks) {
  const int stages = static_cast<int>(busy_ms.size());
  const int units = micro_batches * chunks;
  parallel::CostModel cost;
  for (double b : busy_ms) {
    cost.stage_forward.push_back(b / units / 3);
    cost.stage_backward.push_back(2 * b / units / 3);
  }
  return parallel::simulate(parallel::all_stages(schedule, micro_batches, stages, chunks), cost,
                            parallel::Timelines::left_out)
      .bubble_share;
}

void write_text_file(const std::string& given, const std::string& text) {
  const std::string path = replaceable_file(given, "output file");  // a link's target; never a device or a FIFO
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  const char* hint = "check that the directory exists and is writable, and that the disk is not full";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw Error("cannot write " + path + ": " + std::strerror(errno), hint);
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  int err = ok ? 0 : errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    std::remove(tmp.c_str());
    throw Error("cannot write " + path + ": " + std::strerror(err), hint);
  }
}

}  // namespace artel::train
