// MemoryReport: what one worker held at most during a run, by kind, as
// ZeRO's accounting counts it — parameters, gradients, optimizer state,
// activations, communication buffers — next to the process's peak resident
// memory from the OS (VmHWM). The Trainer measures it every step; at the end
// every worker's report is printed and written to metrics.jsonl.
//
// activations: the most tensor bytes live during a step's forward and
// backward above what was live before it, less what backward left allocated
// (gradients) — the transient working set. communication: registered memory
// of the strategy's process groups still held, beyond the buckets that are
// the gradients (and a sharded step's weights) themselves; the backends' own
// staging memory shows in peak resident. gathered: of the parameters, the
// most a ZeRO-3 worker held gathered at once beyond its shards (the working
// set of the units in use; 0 otherwise). shared: of the peak resident
// memory, shared memory — the worker's registered buffers and the pages of
// its peers' that its collectives read in place — which the host holds once
// however many workers count it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace artel::train {

struct MemoryReport {
  int64_t parameters = 0, gradients = 0, optimizer_state = 0, activations = 0, communication = 0;
  int64_t peak_resident = 0;
  int64_t gathered = 0;
  int64_t shared = 0;  // of peak_resident, shared memory (core/memory_stats.h's shared_resident_bytes)
  // A process that is not a worker ("server 1": a parameter server, whose
  // communication is its per-worker buffers); empty for a worker, named by
  // its rank. Not among values(): workers gather only workers' reports.
  std::string label;

  void keep_max(const MemoryReport& o);      // field by field
  std::vector<int64_t> values() const;       // in the order above, for gathering
  static MemoryReport from_values(const std::vector<int64_t>& v);
  nlohmann::ordered_json to_json() const;    // bytes
};

// The table printed at the end of a run: one row per worker (then the
// labelled processes), MiB.
std::string memory_table(const std::vector<MemoryReport>& workers);

}  // namespace artel::train
