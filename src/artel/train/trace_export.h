// Trace export: turns the events of every rank (core/trace.h) into files a
// person can look at —
//   - a Chrome trace (the "traceEvents" JSON that Perfetto and
//     chrome://tracing open): one process per rank, one thread per track
//     (compute, "comm world", "comm world/[0,1]", ...), so overlap of compute
//     and communication and the waits between ranks are visible;
//   - an SVG of pipeline stages × time for one step window, where the gaps
//     between forward and backward blocks are the pipeline bubble, with each
//     stage's idle share printed beside it (utilisation() computes it).
//
//   std::vector<RankTrace> all = gather_traces(world, label, trace::take());  // trace_gather.h
//   if (world.rank() == 0) write_text_file("run.trace.json", chrome_trace_json(all));
//   write_text_file("pipeline.svg", pipeline_svg(rows, "GPipe, 4 stages, 8 micro-batches"));
#pragma once

#include <string>
#include <vector>

#include "artel/core/trace.h"
#include "artel/parallel/pipeline_schedule.h"

namespace artel::train {

struct RankTrace {
  int rank = 0;
  std::string label;  // e.g. "rank 1 (dp 0, pp 1, tp 0)"
  std::vector<trace::Event> events;
};

// Chrome trace JSON: pid = rank (process_name = label, process_sort_index =
// rank), one tid per track in order of first appearance (thread_name,
// thread_sort_index), complete events ("ph":"X") with ts/dur in microseconds
// relative to the earliest event of all ranks, args {step, micro_batch} where set.
std::string chrome_trace_json(const std::vector<RankTrace>& ranks);

// One row of the pipeline picture: a stage's label and its events.
struct SvgRow {
  std::string label;
  std::vector<trace::Event> events;
};

// Idle share of each row over one window: window = [earliest start, latest
// end] of the compute events (category "compute") of ALL rows; busy = the union
// of that row's compute-event intervals; idle = 1 - busy/window. With no
// compute time at all (window 0), every idle share is 0.
struct Utilisation {
  int64_t window_start_ns = 0;  // the earliest compute event's start
  double window_ms = 0;
  std::vector<double> busy_ms, idle_share;
};
Utilisation utilisation(const std::vector<SvgRow>& rows);

// The idle share each stage's busy time alone implies under `schedule`, with
// no hand-over time or jitter: the pipeline simulator (parallel::simulate,
// the planner's pipeline model too: one cost model) on stages whose
// micro-batch takes busy_ms[s] / M, a third of it forward and two thirds
// backward. Under GPipe that is sum(c) + (M - 1)·max(c) for the step (the
// first micro-batch passes every stage, the other M - 1 follow at the slowest
// stage's pace). Equal stages give the ideal (P - 1)/(M + P - 1); the last
// stage also carries the head, so the others idle a little more. Measured
// idle above this is hand-overs and noise. Under the interleaved schedule a
// stage's busy time is spread over its M·chunks units.
std::vector<double> idle_of_unequal_stages(const std::vector<double>& busy_ms, int micro_batches,
                                           parallel::ScheduleKind schedule, int chunks = 1);

// Self-contained SVG (no scripts) of rows × time over the utilisation window:
// compute events named "forward" / "backward" drawn as rectangles coloured by
// kind (class "forward" / "backward", a <title> tooltip each), labelled with
// the micro-batch number when wide enough; gaps are idle. A time axis in ms,
// a legend, and each row's idle share at its right. Other events are not
// drawn (non-forward/backward compute events still count as busy).
std::string pipeline_svg(const std::vector<SvgRow>& rows, const std::string& title);

// Writes `text` to path + ".tmp-<pid>" and renames it over `path`, so a reader
// never sees half a file. Throws Error naming the path on failure.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace artel::train
