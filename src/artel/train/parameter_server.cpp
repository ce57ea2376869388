#include "artel/train/parameter_server.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <sstream>

#include "artel/core/error.h"
#include "artel/core/threads.h"
#include "artel/core/trace.h"
#include "artel/nn/embedding.h"
#include "artel/optim/clip.h"
#include "artel/parallel/ps_server.h"
#include "artel/train/ps_server_checkpoint.h"
#include "artel/train/rank_agreement.h"
#include "artel/train/recipe.h"
#include "artel/train/trace_gather.h"

namespace artel::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", bytes / (1 << 20));
  return buf;
}

// A worker waits on a bound that a server's --timeout decides (a silent
// worker is dropped after it), so it waits longer than that for a reply.
comm::Duration patience(const comm::ProcessGroup& world) { return 3 * world.options().timeout; }

}  // namespace

void check_parameter_server(const TrainConfig& cfg) {
  if (cfg.ps_servers == 0) return;
  if (cfg.model_parallel())
    throw Error("--ps-servers with --tp / --pp / --micro-batches: a parameter server's workers each run the whole model",
                "use --accum for micro-steps, or drop --ps-servers for a model-parallel mesh");
  if (cfg.was_given("zero") && cfg.zero != 0)  // 0, as a parameter-server run's config.json records it
    throw Error(detail::concat("--zero ", cfg.zero,
                               " with --ps-servers: the servers already hold the optimizer state, sharded over them"),
                "drop --zero");
}

ParameterServerStrategy::ParameterServerStrategy(comm::ProcessGroup& world, parallel::PsRoles roles,
                                                 std::optional<int64_t> staleness, bool sparse_tables)
    : rank_(world.rank()),
      staleness_(staleness),
      sparse_tables_(sparse_tables),
      client_(world, roles, staleness, patience(world)) {}

namespace {

// The sparse embeddings of `model` whose tables move by rows, and their
// parameter's index in the model's order.
std::vector<std::pair<nn::Embedding*, size_t>> row_tables(nn::Model& model, bool sparse_tables) {
  std::vector<std::pair<nn::Embedding*, size_t>> out;
  if (!sparse_tables) return out;
  const nn::NamedParameters params = model.named_parameters();
  for (auto& [path, module] : model.named_modules()) {
    auto* e = dynamic_cast<nn::Embedding*>(module);
    if (!e || !e->sparse()) continue;
    const std::string name = path.empty() ? "weight" : path + ".weight";
    for (size_t i = 0; i < params.size(); ++i)
      if (params[i].first == name) out.emplace_back(e, i);
  }
  return out;
}

}  // namespace

std::vector<parallel::PsParameter> ps_table(nn::Model& model, bool sparse_tables) {
  std::vector<parallel::PsParameter> table;
  for (const nn::DeclaredParameter& d : model.declared_parameters()) table.push_back({d.name, d.shape});
  for (const auto& [e, i] : row_tables(model, sparse_tables)) table[i].sparse = true;
  return table;
}

nn::NamedParameters ParameterServerStrategy::build(nn::Model& model, const data::Dataset& data, uint64_t seed,
                                                   const std::string& init) {
  nn::NamedParameters params = Strategy::build(model, data, seed, init);
  std::vector<Tensor> values;
  for (const auto& [name, p] : params) values.push_back(p.value());
  fetched_.assign(params.size(), {});
  for (const auto& [e, i] : row_tables(model, sparse_tables_))
    e->before_lookup([this, i = i](const Tensor& ids) { fetch_rows(i, ids); });
  client_.start(ps_table(model, sparse_tables_), values, /*introduce=*/rank_ == 0);
  return params;
}

void ParameterServerStrategy::start_servers() {
  if (started_) return;
  started_ = true;
  if (rank_ == 0) client_.start_clock(clock_);
}

// The step's read comes before its forward, apart from it, so that what
// the trainer times as computation (and the straggler knob scales) is the
// model's work alone.
void ParameterServerStrategy::begin_step(int64_t k) {
  clock_ = k - 1;
  start_servers();  // the first step: k - 1 is 0, or the step a resumed run restored
  if (first_clock_ < 0) first_clock_ = clock_;
  const Clock::time_point t0 = Clock::now();
  const int64_t sent = client_.bytes_sent(), received = client_.bytes_received();
  step_bytes_ = 0;
  required_ = client_.required_view(clock_);
  pull(required_, parallel::PsSelection{.dense = true, .sparse = parallel::PsSparse::none});
  seen_.record(last_staleness_);
  count_step_bytes(sent, received);
  pull_s_ = seconds_since(t0);
}

nlohmann::json ParameterServerStrategy::layout() {
  const parallel::PsRoles& roles = client_.roles();
  return {{"world", roles.workers}, {"dp", roles.workers}, {"pp", 1}, {"tp", 1}, {"ps_servers", roles.servers}};
}

void ParameterServerStrategy::write_other_shards(int64_t step, const std::string& store_dir) {
  if (rank_ == 0) client_.checkpoint(step, store_dir);
}

void ParameterServerStrategy::read_other_shards(int64_t step, const std::string& dir) {
  if (rank_ != 0) return;
  client_.restore(step, dir);
  clock_ = step;
}

void ParameterServerStrategy::pull(int64_t required, parallel::PsSelection sel) {
  start_servers();
  trace::Scope span("pull", "sync", "comm");
  const int64_t view = client_.pull(clock_, required, sel);
  last_staleness_ = std::max<int64_t>(0, clock_ - view);
}

double ParameterServerStrategy::forward_backward(std::span<const data::Batch> micro_batches) {
  for (std::vector<int64_t>& f : fetched_) f.clear();
  in_step_ = true;
  const double loss = Strategy::forward_backward(micro_batches);
  in_step_ = false;
  return loss;
}

void ParameterServerStrategy::fetch_rows(size_t param, const Tensor& ids) {
  if (!in_step_) return;  // evaluation and sampling read a whole pull
  const int64_t rows = params_[param].second.value().size(0);
  std::vector<int64_t> want;
  want.reserve(static_cast<size_t>(ids.numel()));
  for (int64_t i = 0; i < ids.numel(); ++i) {
    const int64_t id = ids.dtype() == DType::i32 ? ids.data<int32_t>()[i] : ids.data<int64_t>()[i];
    if (id >= 0 && id < rows) want.push_back(id);  // the lookup itself reports a bad id
  }
  std::sort(want.begin(), want.end());
  want.erase(std::unique(want.begin(), want.end()), want.end());
  std::vector<int64_t> fresh;
  std::set_difference(want.begin(), want.end(), fetched_[param].begin(), fetched_[param].end(),
                      std::back_inserter(fresh));
  if (fresh.empty()) return;
  trace::Scope span("pull rows", "sync", "comm");
  const Clock::time_point t0 = Clock::now();
  const int64_t sent = client_.bytes_sent(), received = client_.bytes_received();
  client_.pull_rows(clock_, required_, param, fresh);
  count_step_bytes(sent, received);
  pull_s_ += seconds_since(t0);
  std::vector<int64_t> merged;
  std::set_union(fetched_[param].begin(), fetched_[param].end(), fresh.begin(), fresh.end(), std::back_inserter(merged));
  fetched_[param] = std::move(merged);
}

void ParameterServerStrategy::clip_grad_norm(float max_norm) {
  std::vector<autograd::Variable> params;
  for (auto& [name, p] : params_) params.push_back(p);
  optim::clip_grad_norm(params, max_norm);
}

double ParameterServerStrategy::optimizer_step(optim::Optimizer& optimizer) {
  const Clock::time_point t0 = Clock::now();
  std::vector<Tensor> grads;
  for (const auto& [name, p] : params_) grads.push_back(p.grad());
  {
    trace::Scope span("push", "sync", "comm");
    const int64_t sent = client_.bytes_sent(), received = client_.bytes_received();
    client_.push(clock_, optimizer.param_groups().at(0).lr, last_staleness_, grads);
    count_step_bytes(sent, received);
  }
  ++clock_;
  return seconds_since(t0);
}

void ParameterServerStrategy::count_step_bytes(int64_t sent_before, int64_t received_before) {
  const int64_t sent = client_.bytes_sent() - sent_before, received = client_.bytes_received() - received_before;
  steps_sent_ += sent;
  steps_received_ += received;
  step_bytes_ += sent + received;
}

EvalResult ParameterServerStrategy::evaluate(const data::Dataset& data, const EvalOptions& opts) {
  pull(clock_);  // every worker's updates up to this worker's clock
  return Strategy::evaluate(data, opts);
}

void ParameterServerStrategy::write_weights(const std::string& path,
                                            const std::map<std::string, std::string>& metadata) {
  pull(clock_);  // after the last step: every update of the run
  Strategy::write_weights(path, metadata);
}

std::string ParameterServerStrategy::describe() const {
  const parallel::PsRoles& roles = client_.roles();
  std::string s = "parameter server: " + roles.describe() + ", staleness " + parallel::describe_staleness(staleness_);
  const std::vector<int64_t>& elements = client_.layout().elements;
  s += "; shards";
  for (size_t i = 0; i < elements.size(); ++i)
    s += (i ? ", " : " ") + mib(static_cast<double>(elements[i]) * 4.0);
  return s;
}

std::string ParameterServerStrategy::describe_sync() const {
  const std::string moved = client_.layout().has_sparse()
                                ? "every step: pull and push the dense parameters whole and the sparse tables' rows the step reads"
                                : "every step: pull all parameters, push all gradients";
  return moved + (staleness_ == 0 ? "; the servers average a clock's pushes" : "; the servers apply each push");
}

nlohmann::ordered_json ParameterServerStrategy::step_record() const {
  return {{"staleness", last_staleness_}, {"ps_bytes", step_bytes_}};
}

void ParameterServerStrategy::finish_run(std::vector<nlohmann::ordered_json>& records,
                                         std::vector<std::string>& lines) {
  const int64_t steps = clock_ - std::max<int64_t>(first_clock_, 0);
  const double per_step = steps > 0 ? 1.0 / static_cast<double>(steps) : 0.0;
  if (reporter()) {
    std::vector<parallel::PsWorkerStats> stats = client_.stats();
    nlohmann::ordered_json workers = nlohmann::ordered_json::array();
    parallel::StalenessHistogram all;
    lines.push_back("parameter server: staleness " + parallel::describe_staleness(staleness_) +
                    "; clocks missing from each read (histogram):");
    for (size_t w = 0; w < stats.size(); ++w) {
      const parallel::PsWorkerStats& s = stats[w];
      nlohmann::ordered_json hist = nlohmann::ordered_json::object();
      std::ostringstream line;
      line << "  worker " << w << ": " << s.pushes << " pushes, mean " << s.staleness.mean() << ", max "
           << s.staleness.max() << " {";
      bool first = true;
      for (const auto& [value, count] : s.staleness.counts()) {
        hist[std::to_string(value)] = count;
        line << (first ? "" : ", ") << value << ": " << count;
        first = false;
      }
      line << "}";
      if (s.dropped) line << "; dropped at clock " << s.dropped_at;
      lines.push_back(line.str());
      all.merge(s.staleness);
      nlohmann::ordered_json j = {{"worker", w}, {"pushes", s.pushes}, {"staleness_histogram", hist}};
      if (s.dropped) j["dropped_at_clock"] = s.dropped_at;
      workers.push_back(j);
    }
    const double sent = static_cast<double>(steps_sent_) * per_step;
    const double received = static_cast<double>(steps_received_) * per_step;
    lines.push_back("parameter server: worker 0 moved " + mib(sent) + " up and " + mib(received) +
                    " down per step (model " + mib(static_cast<double>(model_->num_parameters()) * 4.0) + ")");
    records.push_back({{"parameter_server",
                        {{"staleness", staleness_ ? nlohmann::ordered_json(*staleness_) : nlohmann::ordered_json("inf")},
                         {"workers", workers},
                         {"staleness_mean", all.mean()},
                         {"staleness_max", all.max()},
                         {"bytes_sent_per_step", sent},
                         {"bytes_received_per_step", received}}}});
    servers_memory_ = client_.server_memory();
  }
  client_.done(clock_);
}

std::vector<MemoryReport> ParameterServerStrategy::gather_memory(const MemoryReport& mine) {
  std::vector<MemoryReport> all{mine};
  for (size_t s = 0; s < servers_memory_.size(); ++s) {
    const parallel::PsServerMemory& m = servers_memory_[s];
    all.push_back({.parameters = m.parameters,
                   .gradients = m.gradients,
                   .optimizer_state = m.optimizer_state,
                   .communication = m.buffers,
                   .peak_resident = m.peak_resident,
                   .label = "server " + std::to_string(s)});
  }
  return all;
}

ParameterServerJob::ParameterServerJob(TrainConfig cfg, RunOptions run, std::shared_ptr<comm::ProcessGroup> world)
    : world_(std::move(world)) {
  start(cfg, run);
  if (strategy_) trainer_ = std::make_unique<Trainer>(std::move(cfg), run, strategy_.get());
}

ParameterServerJob::ParameterServerJob(TrainConfig cfg, std::unique_ptr<nn::Model> model,
                                       std::unique_ptr<data::Dataset> data, RunOptions run,
                                       std::shared_ptr<comm::ProcessGroup> world)
    : world_(std::move(world)) {
  start(cfg, run);
  if (strategy_)
    trainer_ = std::make_unique<Trainer>(std::move(cfg), std::move(model), std::move(data), run, strategy_.get());
}

void ParameterServerJob::start(const TrainConfig& cfg, const RunOptions& run) {
  // Servers and workers started alike, before their roles split them (a
  // program of the user's own; `artel train` checked already): a worker on
  // another --staleness ran a consistency the servers did not keep, silently.
  if (world_->size() > 1) check_ranks_agree(*world_, cfg);
  check_parameter_server(cfg);
  trace_path_ = cfg.trace;
  out_ = run.out ? run.out : &std::cout;
  const parallel::PsRoles roles = parallel::PsRoles::of(world_->size(), static_cast<int>(cfg.ps_servers));
  const std::optional<int64_t> staleness = parallel::parse_staleness(cfg.staleness);
  const int rank = world_->rank();
  label_ = roles.is_server(rank) ? "server " + std::to_string(roles.server_index(rank)) : "worker " + std::to_string(rank);
  if (!roles.is_server(rank)) {
    strategy_ = std::make_unique<ParameterServerStrategy>(*world_, roles, staleness, cfg.ps_sparse);
    return;
  }
  if (run.set_threads) set_num_threads(1);  // a server's work is copies and an elementwise update
  server_ = std::make_unique<parallel::ParameterServer>(
      *world_, roles,
      parallel::PsServerOptions{.staleness = staleness,
                                .make_optimizer = [cfg](const nn::NamedParameters& p) { return make_optimizer(cfg, p); },
                                .log = run.out,
                                .save = save_ps_shard(cfg.keep_checkpoints),
                                .restore = restore_ps_shard(),
                                .after_clock = run.after_step});
}

ParameterServerJob::~ParameterServerJob() = default;

void ParameterServerJob::run() {
  trace::enable(!trace_path_.empty());
  if (server_) server_->serve();
  else trainer_->run();
  if (trace_path_.empty()) return;
  trace::enable(false);
  write_run_trace(trace_path_, world_.get(), label_, *out_);
}

}  // namespace artel::train
