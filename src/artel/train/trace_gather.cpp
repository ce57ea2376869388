#include "artel/train/trace_gather.h"

#include <ostream>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "artel/comm/gather_strings.h"
#include "artel/core/error.h"
#include "artel/train/trace_phases.h"

namespace artel::train {
namespace {

using json = nlohmann::json;

// A rank's trace text may not exceed this: rank 0 holds size() times the largest.
constexpr int64_t kMaxTraceBytes = int64_t{1} << 30;

Error malformed(int rank, const std::string& why) {
  std::string line = why;
  std::replace(line.begin(), line.end(), '\n', ' ');
  return Error("gather_traces: malformed trace data from rank " + std::to_string(rank) + ": " + line,
               "every rank must run the same artel build");
}

trace::Event decode_event(int rank, const json& j) {
  if (!j.is_array() || j.size() != 7) throw malformed(rank, "an event is not an array of 7 fields");
  for (int i = 0; i < 3; ++i)
    if (!j[i].is_string()) throw malformed(rank, "event field " + std::to_string(i) + " is not a string");
  for (int i = 3; i < 7; ++i)
    if (!j[i].is_number_integer()) throw malformed(rank, "event field " + std::to_string(i) + " is not an integer");
  trace::Event e;
  e.name = j[0].get<std::string>();
  e.category = j[1].get<std::string>();
  e.track = j[2].get<std::string>();
  e.start_ns = j[3].get<int64_t>();
  e.dur_ns = j[4].get<int64_t>();
  e.step = j[5].get<int64_t>();
  e.micro_batch = j[6].get<int>();
  return e;
}

}  // namespace

std::string encode_rank_trace(const std::string& label, const std::vector<trace::Event>& events) {
  json list = json::array();
  for (const auto& e : events) list.push_back({e.name, e.category, e.track, e.start_ns, e.dur_ns, e.step, e.micro_batch});
  json doc = {{"label", label}, {"events", std::move(list)}};
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

RankTrace decode_rank_trace(int rank, std::string_view bytes) {
  json doc = json::parse(bytes.begin(), bytes.end(), nullptr, false);
  if (doc.is_discarded()) throw malformed(rank, "not valid JSON (" + std::to_string(bytes.size()) + " bytes)");
  if (!doc.is_object() || !doc.contains("label") || !doc["label"].is_string() || !doc.contains("events") ||
      !doc["events"].is_array())
    throw malformed(rank, "expected an object with a string \"label\" and an array \"events\"");
  RankTrace r;
  r.rank = rank;
  r.label = doc["label"].get<std::string>();
  r.events.reserve(doc["events"].size());
  for (const auto& e : doc["events"]) r.events.push_back(decode_event(rank, e));
  return r;
}

std::vector<RankTrace> gather_traces(comm::ProcessGroup& group, const std::string& my_label, std::vector<trace::Event> mine) {
  const std::string text = encode_rank_trace(my_label, mine);
  mine.clear();
  const std::vector<std::string> texts =
      comm::gather_strings(group, text, 0,
                           {.max_bytes = kMaxTraceBytes, .what = "trace",
                            .hint = "trace fewer steps, or gather and write the trace more often"});
  std::vector<RankTrace> all;
  for (size_t r = 0; r < texts.size(); ++r) all.push_back(decode_rank_trace(static_cast<int>(r), texts[r]));
  return all;
}

std::vector<RankTrace> write_run_trace(const std::string& path, comm::ProcessGroup* group, const std::string& my_label,
                                       std::ostream& out) {
  std::vector<trace::Event> mine = trace::take();
  std::vector<RankTrace> all =
      group ? gather_traces(*group, my_label, std::move(mine)) : std::vector<RankTrace>{{0, my_label, std::move(mine)}};
  if (group && group->rank() != 0) return all;
  write_text_file(path, chrome_trace_json(all));
  out << "wrote " << path << " (open in https://ui.perfetto.dev or chrome://tracing)\n"
      << phases_table(trace_phases(all, first_counted_step(all))) << std::flush;
  return all;
}

}  // namespace artel::train
