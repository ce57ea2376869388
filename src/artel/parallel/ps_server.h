// ParameterServer: one server of a parameter-server job (ps_protocol.h). It
// keeps its shard of every parameter (ps_shard_plan.h: large tensors split
// over all servers, small ones whole) and that shard's optimizer state, and
// serves each worker on a thread of its own: pulls are answered once the
// worker's read may go on, pushes are applied here.
//
// Note [Consistency]
// Clocks count the steps a worker has pushed (ps_clock.h). A worker at clock
// c asks for every update of clocks below c − s (s = --staleness), and the
// server answers once every live worker has pushed that far — the wait and
// the read guarantee are one rule. What it answers is everything applied so
// far, its view v = the slowest live worker's clock (with newer updates of
// faster workers in it too, under SSP and ASP); the worker records c − v.
//   - s = 0 (BSP): the pushes of one clock are kept apart and, once every
//     live worker's is in, averaged in worker order and applied as one
//     optimizer step at the step's learning rate: synchronous data
//     parallelism, to float rounding (the order of the sum).
//   - s > 0 (SSP) and no bound (ASP): each push is applied when it arrives,
//     as one optimizer step at the pusher's learning rate / live workers, so
//     that the W pushes of a clock move plain SGD as far as one BSP step does.
//     (AdamW normalises its update, so each push is then a step of lr/W.)
// A pull or push may carry only some of the elements (ps_selection.h): a
// sparse table's rows a batch reads. The server still steps the whole shard
// — a row no worker touched has a zero gradient, which AdamW's moments and
// weight decay see as dense training does — so a sparse table changes the
// bytes on the wire, never the result.
//
// Under SSP and ASP a worker that dies or says nothing for the group's
// timeout is dropped: it no longer holds the others back, and server 0 says
// so in one line. Under BSP its loss is the job's: serve() throws.
//
//   ParameterServer server(*world, roles, {.staleness = 3, .make_optimizer = ...});
//   server.serve();  // until every worker is done or dropped
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "artel/comm/process_group.h"
#include "artel/nn/module.h"
#include "artel/optim/optimizer.h"
#include "artel/parallel/ps_clock.h"
#include "artel/parallel/ps_protocol.h"
#include "artel/parallel/ps_selection.h"

namespace artel::parallel {

// What a server's checkpoint hooks see: its part of every parameter (the
// layout's segments of this server, at their offsets in `values`) and the
// optimizer that owns those elements.
struct PsShard {
  const PsLayout& layout;
  int server;
  Tensor values;
  optim::Optimizer& optimizer;
};

struct PsServerOptions {
  std::optional<int64_t> staleness = 0;  // Note [Consistency]; nullopt: ASP
  // The optimizer over parameters of the whole model's shapes (the same
  // recipe as a worker's); the server shards it to its own elements.
  std::function<std::unique_ptr<optim::Optimizer>(const nn::NamedParameters&)> make_optimizer;
  std::ostream* log = nullptr;  // drop lines (server 0); null: std::cerr
  // Write this server's shard of the checkpoint of `step` under `dir` (the
  // run's checkpoint folder) / read it back from checkpoint directory `dir`.
  // Called with every push held off; they throw artel::Error on failure.
  // Null: checkpoints are refused.
  std::function<void(const PsShard&, int64_t step, const std::string& dir)> save;
  std::function<void(const PsShard&, const std::string& dir)> restore;
  // Called with the slowest live worker's clock each time it advances (a
  // test's fault injection: "after step K" on a server). Null: nothing.
  std::function<void(int64_t)> after_clock;
};

class ParameterServer {
 public:
  // Collective over `world`: makes the pair groups, then takes worker 0's
  // table and initial values.
  ParameterServer(comm::ProcessGroup& world, const PsRoles& roles, PsServerOptions opts);
  ~ParameterServer();
  ParameterServer(const ParameterServer&) = delete;
  ParameterServer& operator=(const ParameterServer&) = delete;

  // Serves until every worker is done or dropped. Throws when a worker is
  // lost under BSP (the message names it).
  void serve();

  int index() const { return index_; }
  // What this server holds, now (its buffers grow to their peak in the first step).
  PsServerMemory memory();
  int64_t elements() const { return values_.numel(); }

 private:
  void receive_table();
  void serve_worker(int w);  // one worker's thread
  bool handle(int w, const std::vector<int64_t>& header);  // false once the worker is done
  // A push's gradient of the elements selected, into pending_[w] (zeros elsewhere).
  void receive_push(int w, PsSelection sel, int64_t row_words);
  void apply_push(int w, int64_t clock, double lr, int64_t staleness, const Tensor& grads);
  void answer_pull(int w, int64_t required, PsSelection sel, int64_t row_words);
  PsRowList receive_rows(int w, int64_t words);
  void answer_stats(int w);
  void answer_memory(int w);  // kMemory: memory(), to the worker that asked
  // kCheckpoint, kRestore: run the hook, answer kOutcome.
  void checkpoint(int w, bool save, int64_t step, const std::string& dir);
  void lose(int w, const std::string& why);  // a worker's group failed before it was done
  // Waits for `work` while watching stop_; false when stopping first.
  bool await(const comm::WorkPtr& work);

  PsRoles roles_;
  int index_;
  PsServerOptions opts_;
  std::vector<std::shared_ptr<comm::ProcessGroup>> pairs_;  // per worker
  std::unique_ptr<PsLayout> layout_;
  nn::NamedParameters params_;  // whole shapes, never touched: the optimizer's names and groups
  std::unique_ptr<optim::Optimizer> optimizer_;
  Tensor values_;                // this server's elements
  Tensor grads_;                 // the gradient the optimizer reads, over the same elements
  std::vector<Tensor> pending_;  // BSP: each worker's push of the current clock
  std::vector<Tensor> messages_; // per worker: a selective pull's or push's elements, packed
  std::vector<std::string> tracks_;  // per worker: its row in this server's timeline (--trace)

  std::mutex mu_;  // guards everything below and the tensors above
  std::condition_variable cv_;
  PsClock clock_;
  std::vector<bool> done_;
  std::vector<PsWorkerStats> stats_;
  std::string fatal_;
  bool started_ = false;  // worker 0's kStart came: pulls may be answered
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace artel::parallel
