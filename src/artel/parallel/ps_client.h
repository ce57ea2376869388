// PsClient: a worker's side of a parameter-server job (ps_protocol.h). It
// pulls the model's values from every server — each its own elements, all
// asked at once — and pushes the gradient back, each server its elements,
// counting the bytes it moves. Which clocks a read must hold is
// required_view() (Note [Consistency] in ps_server.h). A sparse table
// (PsParameter::sparse) is read by the rows a step looks up (pull_rows) and
// pushed by the same rows: every other row's gradient is zero.
//
//   PsClient ps(*world, roles, /*staleness=*/3, patience);
//   ps.start(params, values, /*introduce=*/rank == 0);
//   for (c = 0; c < steps; ++c) {
//     int64_t view = ps.pull(c, ps.required_view(c));   // values now hold it
//     ...forward, backward...
//     ps.push(c, lr, c - view, grads);
//   }
//   ps.done(steps);
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "artel/comm/process_group.h"
#include "artel/parallel/ps_protocol.h"
#include "artel/parallel/ps_selection.h"

namespace artel::parallel {

class PsClient {
 public:
  // Collective over `world`: makes the pair groups. `patience`: how long a
  // reply may take (ps_pair_groups).
  PsClient(comm::ProcessGroup& world, const PsRoles& roles, std::optional<int64_t> staleness, comm::Duration patience);
  ~PsClient();

  // The model's parameters, whole, in the model's order: `values` alias
  // them and pulls write into them. With `introduce` (worker 0, once), the
  // servers get the table and their elements' starting values from them.
  void start(const std::vector<PsParameter>& params, std::vector<Tensor> values, bool introduce);

  // The clocks a read at `clock` must hold: every update of clocks below this.
  int64_t required_view(int64_t clock) const;
  // Reads every server's elements (or those `sel` names) into the values
  // once they hold every update of clocks below `required`; returns the
  // view the read holds (the smallest of the servers').
  int64_t pull(int64_t clock, int64_t required, PsSelection sel = {});
  // Reads rows `rows` (ascending, distinct) of sparse table `param` alike,
  // and keeps them for the next push.
  int64_t pull_rows(int64_t clock, int64_t required, size_t param, const std::vector<int64_t>& rows);
  // The gradient of step `clock` (one tensor per parameter, whole; an
  // undefined one counts as zeros) at learning rate `lr`; `staleness` is
  // what this step's read missed (clock − view), for the statistics. Of a
  // sparse table, only the rows pulled since the last push go.
  void push(int64_t clock, double lr, int64_t staleness, const std::vector<Tensor>& grads);
  // Worker 0, before its first step: every worker's clock starts at `clock`
  // (0, or a resumed run's step); the servers answer no read before.
  void start_clock(int64_t clock);
  // Worker 0: every server writes its shard of the checkpoint of `step`
  // under `dir` once every live worker has pushed that step / reads its
  // shard back from checkpoint directory `dir`. Throws naming a server that
  // could not, with its reason.
  void checkpoint(int64_t step, const std::string& dir);
  void restore(int64_t step, const std::string& dir);

  // Server 0's statistics of every worker (collected from their pushes).
  std::vector<PsWorkerStats> stats();
  // What each server holds, by server.
  std::vector<PsServerMemory> server_memory();
  // Tells every server this worker is finished (after its last push or read).
  void done(int64_t clock);

  const PsLayout& layout() const { return *layout_; }
  const PsRoles& roles() const { return roles_; }
  int64_t bytes_sent() const { return sent_; }
  // Its copy of the servers' elements (one flat buffer a server): what a
  // pull lands in and a push is packed from.
  int64_t buffer_bytes() const;
  int64_t bytes_received() const { return received_; }

 private:
  // Runs `fn` for server s; an error names the server.
  template <class Fn>
  void with_server(int s, Fn&& fn);
  void finish_pushes();
  // One server's read of `sel` (and `rows`) into the values; its view.
  int64_t read(int s, PsSelection sel, const PsRowList& rows);
  void send_rows(comm::ProcessGroup& pair, const std::vector<int64_t>& words);
  void ask_every_server(PsMessage kind, int64_t step, const std::string& dir);  // and wait for their outcomes

  PsRoles roles_;
  std::optional<int64_t> staleness_;
  std::vector<std::shared_ptr<comm::ProcessGroup>> pairs_;  // per server
  std::unique_ptr<PsLayout> layout_;
  std::vector<Tensor> values_;
  std::vector<Tensor> buffers_;         // per server: its elements, flat
  std::vector<comm::WorkPtr> pushing_;  // per server: the push in flight
  std::vector<std::vector<int64_t>> touched_;  // per parameter: sparse rows pulled since the last push
  int64_t sent_ = 0, received_ = 0;
};

}  // namespace artel::parallel
