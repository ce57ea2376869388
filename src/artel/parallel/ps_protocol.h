// What a parameter server's workers and servers say to each other, and the
// groups they say it over. A job of W workers and S servers is one world:
// ranks 0 … W−1 work, ranks W … W+S−1 serve (MXNet's and ps-lite's roles,
// given by rank so that `artel train --nproc` and `mpirun` place them alike).
//
// Every (worker, server) pair has a group of its own — worker rank 0,
// server rank 1 — so a server serves each worker on a thread of its own
// without one worker's messages queueing behind another's, and the messages
// of a pair arrive in order. A message is a header of kHeaderWords int64s
// and then its payload, if any:
//
//   worker -> server
//     kHello  [kind, 0, table words]   worker 0 only, first: the parameter
//                                      table (ps_table_text), then the
//                                      server's elements' initial values
//     kPull   [kind, clock, required view, selection, row words]  then the
//                                      row list, if any (ps_selection.h) -> kValues
//     kPush   [kind, clock, lr (f64 bits), staleness seen, selection, row words]
//                                      then the row list, if any, and the
//                                      gradient of the elements selected
//     kStats  [kind]                   -> kStatsReply (server 0 keeps them)
//     kMemory [kind]                   -> kMemoryReply: what this server holds
//     kDone   [kind, clock]            the worker is finished
//     kStart  [kind, clock]            worker 0, before its first step: every
//                                      worker's clock starts here (a resumed
//                                      run's step); no pull is answered before
//     kCheckpoint [kind, step, path bytes] then the path   worker 0: write
//                                      this server's shard of the checkpoint
//                                      of `step` once every live worker has
//                                      pushed it -> kOutcome
//     kRestore [kind, step, path bytes] then the path   worker 0: read this
//                                      server's elements and optimizer state
//                                      back from that checkpoint -> kOutcome
//   server -> worker
//     kValues [kind, view, elements] then the elements selected: every
//                          update of clocks below `view` from every live worker is in them
//     kStatsReply [kind, words] then `words` int64s (PsWorkerStats, encoded)
//     kMemoryReply [kind, words] then `words` int64s (PsServerMemory, encoded)
//     kOutcome [kind, ok, text bytes] then the text: what went wrong, if anything
//
// A server's elements are its parts of every parameter (ps_shard_plan.h),
// flat, in the plan's parameter order: PsLayout says where each part sits.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "artel/comm/process_group.h"
#include "artel/core/tensor.h"
#include "artel/parallel/ps_clock.h"
#include "artel/parallel/ps_shard_plan.h"

namespace artel::parallel {

enum class PsMessage : int64_t {
  kHello = 1, kPull, kValues, kPush, kStats, kStatsReply, kDone, kStart, kCheckpoint, kRestore, kOutcome, kMemory,
  kMemoryReply
};
inline constexpr int64_t kHeaderWords = 6;

// Who is who in the world of a parameter-server job.
struct PsRoles {
  int workers = 0;
  int servers = 0;
  bool is_server(int rank) const { return rank >= workers; }
  int server_index(int rank) const { return rank - workers; }
  int server_rank(int server) const { return workers + server; }
  // From the world size and --ps-servers; throws when no rank is left to work.
  static PsRoles of(int world_size, int servers);
  // "4 workers (ranks 0-3), 2 servers (ranks 4-5)"
  std::string describe() const;
};

// The groups of this rank: a worker's to each server (index = server), a
// server's to each worker (index = worker). Collective over the world: every
// rank calls it once, at the same point. `patience` is how long a worker
// waits for a reply (longer than a server's --timeout, which decides when a
// silent worker is dropped and so when a bounded read can go on).
std::vector<std::shared_ptr<comm::ProcessGroup>> ps_pair_groups(comm::ProcessGroup& world, const PsRoles& roles,
                                                                 comm::Duration patience);

// A parameter as the servers know it.
struct PsParameter {
  std::string name;
  Shape shape;
  bool sparse = false;  // a table read by rows (ps_selection.h); at least 1-D
};
// "name<TAB>d0,d1,...[<TAB>sparse]\n" per parameter: the table worker 0 sends.
std::string ps_table_text(const std::vector<PsParameter>& params);
std::vector<PsParameter> parse_ps_table(const std::string& text);  // throws on a malformed table

// One part as a server holds it: elements [begin, end) of parameter `param`
// at `offset` in the server's flat elements.
struct PsSegment {
  size_t param = 0;
  int64_t begin = 0, end = 0;
  int64_t offset = 0;
};

// The plan over the servers and, per server, where its parts sit.
struct PsLayout {
  std::vector<PsParameter> params;
  std::vector<PsPlacement> plan;
  std::vector<std::vector<PsSegment>> segments;  // per server
  std::vector<int64_t> elements;                 // per server
  // A sparse table is cut between rows only (ps_shard_plan.h's units).
  PsLayout(std::vector<PsParameter> params, int servers);
  // Elements per row of a sparse table (1 for a dense parameter).
  int64_t row_elements(size_t param) const;
  bool has_sparse() const;
};

// Headers and payloads over a pair's group (blocking; errors as the group throws them).
void ps_send_header(comm::ProcessGroup& pair, int peer, PsMessage kind, int64_t a = 0, int64_t b = 0, int64_t c = 0,
                    int64_t d = 0, int64_t e = 0);
std::vector<int64_t> ps_recv_header(comm::ProcessGroup& pair, int peer);
// A text (a path, an error) after a header that gives its length.
void ps_send_text(comm::ProcessGroup& pair, int peer, const std::string& text);
std::string ps_recv_text(comm::ProcessGroup& pair, int peer, int64_t bytes);
// A reply of int64 words (kStatsReply, kMemoryReply): a header of `kind`
// that gives their count, then the words. The receiver throws when the
// header is of another kind (naming `what` it expected).
void ps_send_words(comm::ProcessGroup& pair, int peer, PsMessage kind, const std::vector<int64_t>& words);
std::vector<int64_t> ps_recv_words(comm::ProcessGroup& pair, int peer, PsMessage kind, const std::string& what);
// int64 words <-> the bytes of a text (the table) or of stats.
Tensor ps_words(const std::string& text);
std::string ps_text(const Tensor& words, int64_t bytes);
int64_t ps_word_count(int64_t bytes);

// What server 0 saw of one worker, for the summary.
struct PsWorkerStats {
  int64_t pushes = 0;
  bool dropped = false;
  int64_t dropped_at = 0;  // the worker's clock when it was dropped
  StalenessHistogram staleness;
};
std::vector<int64_t> encode_ps_stats(const std::vector<PsWorkerStats>& stats);
std::vector<PsWorkerStats> decode_ps_stats(const std::vector<int64_t>& words);

// What one server holds at most, in bytes (ps_server.h): its shard's
// weights and the gradient its optimizer reads, that optimizer's state, the
// per-worker buffers (pending pushes, pulls' snapshots), and the process's
// peak resident memory (VmHWM).
struct PsServerMemory {
  int64_t parameters = 0, gradients = 0, optimizer_state = 0, buffers = 0, peak_resident = 0;
  std::vector<int64_t> encode() const;
  static PsServerMemory decode(const std::vector<int64_t>& words);  // throws on a wrong count
};

// --staleness: "0" (BSP), a positive count (SSP) or "inf" (ASP, no bound).
std::optional<int64_t> parse_staleness(const std::string& text);  // throws on anything else
std::string describe_staleness(std::optional<int64_t> staleness);  // "0 (BSP)", "3 (SSP)", "inf (ASP)"

}  // namespace artel::parallel
