// Trace gather: brings every rank's timeline events to rank 0, which writes
// the one Chrome trace of the job (trace_export.h).
//
// Collective over `group`: every rank calls it with its own label and events.
// Each rank's events travel as JSON text packed into an i64 tensor (the
// groups move no bytes type): the sizes go first with an all_gather, then the
// texts, padded to the longest, with one gather to rank 0.
//
//   auto traces = gather_traces(world, "rank 1 (dp 0, pp 1, tp 0)", trace::take());
//   if (world.rank() == 0) write_text_file(path, chrome_trace_json(traces));
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "artel/comm/process_group.h"
#include "artel/train/trace_export.h"

namespace artel::train {

// Rank 0 gets every rank's trace in rank order; the others get an empty vector.
// Throws Error naming the rank whose data is malformed or too large.
std::vector<RankTrace> gather_traces(comm::ProcessGroup& group, const std::string& my_label, std::vector<trace::Event> mine);

// The end of a traced run (`--trace FILE`): takes this process's events,
// gathers every worker's over `group` (null: this process alone) and on rank 0
// writes FILE as a Chrome trace, says so on `out` with every worker's step
// phases (trace_phases.h) and returns all of them
// (other ranks: an empty vector). Collective over `group`.
std::vector<RankTrace> write_run_trace(const std::string& path, comm::ProcessGroup* group, const std::string& my_label,
                                       std::ostream& out);

// The wire format (JSON text), exposed for tests: decode throws a one-line
// Error naming `rank` when the bytes are not what encode writes.
std::string encode_rank_trace(const std::string& label, const std::vector<trace::Event>& events);
RankTrace decode_rank_trace(int rank, std::string_view bytes);

}  // namespace artel::train
