// A parameter-server job in the training loop (`artel train --nproc W
// --ps-servers S --staleness s`): W workers train, S servers keep the
// parameters (parallel/ps_server.h). Roles come from the rank
// (parallel/ps_protocol.h), so `mpirun -np W+S artel train --backend mpi
// --ps-servers S` places them alike.
//
// A worker's step, through ParameterServerStrategy:
//   pull (waits only as Note [Consistency] in ps_server.h requires) ->
//   forward, backward on its own rows -> [clip its own gradient] -> push.
// Its clock is the steps it has pushed. The reporter (worker 0) prints its
// own loss (the workers are at different clocks, so there is no common
// step to average over), evaluates on a read holding every worker's
// updates up to its own clock, writes final.safetensors from a read holding
// every update of the run, and at the end the staleness every worker saw
// (a histogram per worker) and the bytes it moved, into metrics.jsonl and
// onto the terminal. Each step's line carries the clocks its read missed
// ("staleness") and the bytes this worker moved in it, both ways ("ps_bytes").
//
//   auto world = comm::init_process_group(...);
//   ParameterServerJob job(cfg, run, world);   // a worker or a server, by rank
//   job.run();
#pragma once

#include <memory>
#include <optional>

#include "artel/comm/process_group.h"
#include "artel/parallel/ps_client.h"
#include "artel/parallel/ps_protocol.h"
#include "artel/train/strategy.h"
#include "artel/train/trainer.h"

namespace artel::parallel {
class ParameterServer;
}  // namespace artel::parallel

namespace artel::train {

class ParameterServerStrategy : public Strategy {
 public:
  // Collective over `world` (the pair groups).
  // With `sparse_tables`, the model's sparse embeddings (nn::Embedding::sparse)
  // move by the rows a step looks up.
  ParameterServerStrategy(comm::ProcessGroup& world, parallel::PsRoles roles, std::optional<int64_t> staleness,
                          bool sparse_tables = true);

  int64_t replica() const override { return rank_; }
  int64_t replicas() const override { return client_.roles().workers; }
  bool reporter() const override { return rank_ == 0; }
  bool synchronises() const override { return true; }
  // The whole model, drawn from the seed (or --init) as every worker draws
  // it; worker 0 hands the servers their parts of it. Each sparse embedding
  // gets a hook that pulls the rows it is about to read during a step.
  nn::NamedParameters build(nn::Model& model, const data::Dataset& data, uint64_t seed,
                            const std::string& init) override;
  void begin_step(int64_t k) override;  // the step's pull, before its forward
  // Checkpoints: the servers hold the model and its optimizer state, so
  // they write and read the shards (ps_server_checkpoint.h); worker 0 asks
  // them and writes only its dropout generator.
  std::vector<HeldPart> held_parts(optim::Optimizer&) override { return {}; }
  std::vector<HeldPart> wanted_parts(optim::Optimizer&) override { return {}; }
  // {"world": workers, "dp": workers, "pp": 1, "tp": 1, "ps_servers": S}
  nlohmann::json layout() override;
  int shard() override { return rank_ == 0 ? 0 : -1; }
  int shards() override { return 1 + client_.roles().servers; }
  void write_other_shards(int64_t step, const std::string& store_dir) override;
  void read_other_shards(int64_t step, const std::string& dir) override;
  double forward_backward(std::span<const data::Batch> micro_batches) override;
  double sync_gradients() override { return pull_s_; }
  void clip_grad_norm(float max_norm) override;                // in place: the push sends clipped gradients
  double optimizer_step(optim::Optimizer& optimizer) override;  // the push
  EvalResult evaluate(const data::Dataset& data, const EvalOptions& opts) override;
  void write_weights(const std::string& path, const std::map<std::string, std::string>& metadata) override;
  std::string describe() const override;
  std::string describe_sync() const override;
  nlohmann::ordered_json step_record() const override;
  void finish_run(std::vector<nlohmann::ordered_json>& records, std::vector<std::string>& lines) override;
  // The reporter's own, then every server's (asked for in finish_run, while
  // the servers still serve): the workers do not reduce with each other.
  std::vector<MemoryReport> gather_memory(const MemoryReport& mine) override;
  int64_t communication_bytes() const override { return client_.buffer_bytes(); }

 private:
  // Into the model (everything, by default); records the staleness of a step's read.
  void pull(int64_t required, parallel::PsSelection sel = {});
  void count_step_bytes(int64_t sent_before, int64_t received_before);
  void start_servers();  // worker 0, once: every worker's clock starts at clock_
  void fetch_rows(size_t param, const Tensor& ids);  // a sparse table's lookup during a step


  int rank_;
  std::optional<int64_t> staleness_;
  bool sparse_tables_;
  parallel::PsClient client_;
  bool started_ = false;                       // the servers were told where the clocks start
  bool in_step_ = false;                       // between a step's pull and its backward
  int64_t required_ = 0;                       // the view this step's reads must hold
  std::vector<std::vector<int64_t>> fetched_;  // per parameter: rows of a sparse table read this step
  int64_t clock_ = 0;          // steps pushed
  int64_t first_clock_ = -1;   // of this run (a resumed one starts later)
  double pull_s_ = 0;          // this step's wait for its read
  int64_t last_staleness_ = 0;
  int64_t step_bytes_ = 0;                  // this step's pull and push, both ways
  int64_t steps_sent_ = 0, steps_received_ = 0;  // over the steps of this run (not the setup, evaluations, final read)
  parallel::StalenessHistogram seen_;
  std::vector<parallel::PsServerMemory> servers_memory_;  // the reporter's, at the end of the run
};

// One rank of a parameter-server job: a worker (a Trainer over
// ParameterServerStrategy) or a server.
class ParameterServerJob {
 public:
  // Collective over `world`. Throws for settings a parameter server cannot
  // honour (tensor or pipeline parallelism, --zero).
  ParameterServerJob(TrainConfig cfg, RunOptions run, std::shared_ptr<comm::ProcessGroup> world);
  // A model and dataset of the user's own (Trainer's second constructor):
  // the workers train them; the servers take the parameter table from worker 0
  // and never look at either.
  ParameterServerJob(TrainConfig cfg, std::unique_ptr<nn::Model> model, std::unique_ptr<data::Dataset> data,
                     RunOptions run, std::shared_ptr<comm::ProcessGroup> world);
  ~ParameterServerJob();
  bool is_server() const { return server_ != nullptr; }
  Trainer* trainer() { return trainer_.get(); }  // null on a server
  // A worker trains; a server serves until every worker is done or dropped
  // (throws when one is lost under BSP).
  void run();

 private:
  // Makes this rank's server, or its strategy (the caller then makes the trainer).
  void start(const TrainConfig& cfg, const RunOptions& run);

  std::shared_ptr<comm::ProcessGroup> world_;
  std::string trace_path_;   // --trace: every worker's and server's timeline, gathered into one file
  std::string label_;        // "worker 2", "server 0": this rank's row in the timeline
  std::ostream* out_;
  std::unique_ptr<parallel::ParameterServer> server_;
  std::unique_ptr<ParameterServerStrategy> strategy_;
  std::unique_ptr<Trainer> trainer_;
};

// The parameter table the servers are given for `model` (parallel/ps_protocol.h;
// its whole shapes, declared or materialised), its sparse embeddings marked
// to move by rows when `sparse_tables` (--ps-sparse): what decides each
// server's shard.
std::vector<parallel::PsParameter> ps_table(nn::Model& model, bool sparse_tables);

// Settings a parameter-server job refuses, with the reason (before any
// process starts).
void check_parameter_server(const TrainConfig& cfg);

}  // namespace artel::train
