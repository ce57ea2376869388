// The collective benchmark (`artel bench comm`), as a library function: one op
// over sizes doubling from min_bytes to max_bytes, warm-up then timed
// iterations, each row checked, reported like nccl-tests.
//
// time = the slowest rank's mean time per op; algbw = size / time;
// busbw = algbw × factor (all_reduce 2(n-1)/n; all_gather, reduce_scatter and
// all_to_all (n-1)/n; broadcast, reduce and sendrecv 1), GB = 1e9 B. `size` is
// the bytes of the whole buffer (the gathered output for all_gather, the input
// for reduce_scatter). #wrong counts elements of a final checked run that differ
// from the expected result on any rank. sent is measured: the most bytes any
// rank's messages carried per timed op (ProcessGroup::bytes_sent; 0 for
// direct-read shared-memory algorithms, which send no messages; across hosts
// for the hierarchical ones; unknown for MPI's own, "native").
// algorithm names the one that ran: what "auto" chose for that size.
//
//   auto rows = comm::bench_collective(*pg, {.op = "all_reduce", .max_bytes = 1 << 20});
//   for (auto& r : rows) printf("%zu %.1f\n", r.bytes, r.busbw);
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "artel/comm/process_group.h"

namespace artel::comm {

struct BenchOptions {
  std::string op = "all_reduce";  // all_reduce broadcast reduce all_gather reduce_scatter all_to_all sendrecv
  size_t min_bytes = 8;
  size_t max_bytes = 256ull << 20;
  int iters = 0;                  // timed iterations per size; 0 = by size (about 256 MiB moved, 5..1000)
  int warmup = 0;                 // 0 = iters / 10, at least 2
  std::string algorithm = "auto";
  DType dtype = DType::f32;
  ReduceOp redop = ReduceOp::sum;
  bool registered = true;         // buffers from ProcessGroup::alloc when they fit
};

struct BenchRow {
  size_t bytes = 0, count = 0;
  std::string type, redop;
  int root = -1;                  // -1: none
  double time_us = 0, algbw = 0, busbw = 0;  // GB/s
  int64_t wrong = 0;
  bool registered = false;
  std::optional<double> sent;     // bytes per op, the busiest rank's; none when a library's own collective ran
  std::string algorithm;          // the one that ran (auto's choice); "-" for sendrecv
};

// Collective over the group: every rank calls it with the same options.
std::vector<BenchRow> bench_collective(ProcessGroup& pg, const BenchOptions& opts);
double bus_factor(const std::string& op, int ranks);
// Throws Error naming what is wrong: an op that is not benchmarkable (with
// the choices), sizes out of order, or none that holds an element for each
// of `ranks` ranks (0: not known yet). What a launcher checks before it
// starts ranks, so that a bad flag is one line and not one a rank.
void check_bench_options(const BenchOptions& opts, int ranks);

}  // namespace artel::comm
