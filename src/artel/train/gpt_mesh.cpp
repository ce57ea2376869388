#include "artel/train/gpt_mesh.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "artel/autograd/ops.h"
#include "artel/core/error.h"
#include "artel/core/memory_stats.h"
#include "artel/core/trace.h"
#include "artel/parallel/gpt_sharding.h"

namespace artel::train {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

constexpr const char* kModel = "model/";
constexpr const char* kOptim = "optim/";
constexpr const char* kRng = "rng/dropout";

// An optimizer key "<kind>.<parameter name>" -> its parameter's name.
std::string param_of_state(const std::string& key) { return key.substr(key.find('.') + 1); }
bool is_step_count(const std::string& key) { return key.compare(0, 5, "step.") == 0; }

Tensor rng_tensor(const RngState& s) {
  Tensor t = Tensor::empty({4}, DType::i64);
  int64_t* d = t.data<int64_t>();
  d[0] = static_cast<int64_t>(s.seed), d[1] = static_cast<int64_t>(s.stream);
  d[2] = static_cast<int64_t>(s.counter), d[3] = s.used;
  return t;
}

RngState rng_state(const Tensor& t) {
  const int64_t* d = t.data<int64_t>();
  return {static_cast<uint64_t>(d[0]), static_cast<uint64_t>(d[1]), static_cast<uint64_t>(d[2]),
          static_cast<uint32_t>(d[3])};
}

}  // namespace

void check_mesh(const TrainConfig& cfg, int world) {
  cfg.validate();
  parallel::Topology::for_world(world, static_cast<int>(cfg.pp), static_cast<int>(cfg.tp));
  if (cfg.tp == 1 || cfg.data.empty()) return;
  const int64_t vocab = data::open_dataset(cfg.data, {.block_size = cfg.block_size})->num_classes();
  if (vocab % cfg.tp != 0)
    throw Error(detail::concat("--tp ", cfg.tp, " does not divide the vocabulary of ", vocab, " tokens of ", cfg.data),
                "choose --tp dividing the vocabulary size");
}

GptMesh::GptMesh(const TrainConfig& cfg, parallel::MeshGroups groups)
    : cfg_(cfg), groups_(std::move(groups)), schedule_(parallel::parse_schedule_kind(cfg.schedule)) {
  ARTEL_CHECK(cfg_.model == "gpt", "model parallelism needs --model gpt, got ", cfg_.model);
  scalar_ = Tensor::zeros({2}, DType::f64);
}

GptMesh::~GptMesh() = default;

bool GptMesh::holds_loss() const { return shard_->last_stage() && shard_->tp_rank() == 0; }

nn::NamedParameters GptMesh::shard(models::Model& full) {
  const models::ModelConfig& mc = full.config();
  const int P = static_cast<int>(cfg_.pp);
  stages_ = partition(full);
  const int stage = groups_.coord.pp;
  shard_ = std::make_unique<parallel::GptShard>(
      mc, parallel::ShardPlace{.stage = stage, .stages = P, .blocks = stages_[stage], .tp = groups_.tp.get()});
  shard_->load_from_full(full.state_dict());
  shard_->train(full.is_training());
  executor_ = std::make_unique<parallel::PipelineExecutor>(
      stage, P, groups_.links, Shape{cfg_.batch_size / cfg_.micro_batches, cfg_.block_size, mc.n_embd});
  nn::NamedParameters params = shard_->named_parameters();
  for (auto& [name, p] : params)
    if (P > 1 && parallel::is_tied_embedding(name)) tied_embedding_ = p;
  return params;
}

// --stage-layers: explicit counts, or balanced by parameters (the default) or
// by measured cost.
std::vector<parallel::BlockRange> GptMesh::partition(const models::Model& full) {
  const models::ModelConfig& mc = full.config();
  const int P = static_cast<int>(cfg_.pp);
  std::vector<int64_t> counts = cfg_.stage_layer_counts();
  if (!counts.empty()) return parallel::explicit_stages(mc, counts);
  if (cfg_.stage_layers != "cost" || P == 1) return parallel::balanced_stages(mc, P);
  measured_ = measured_costs(full);
  return parallel::balanced_stages(mc, P, *measured_);
}

// Every worker times the pieces on its own core, and the average over the
// world is used, so all of them cut the model the same way.
parallel::PieceCosts GptMesh::measured_costs(const models::Model& full) {
  const models::ModelConfig& mc = full.config();
  parallel::GptShard whole(mc, {.stage = 0, .stages = 1, .blocks = {0, mc.n_layer}});
  whole.load_from_full(full.state_dict());
  const parallel::PieceCosts mine = whole.measure_costs(cfg_.batch_size / cfg_.micro_batches, /*repeats=*/5);
  Tensor t = Tensor::empty({3}, DType::f64);
  double* d = t.data<double>();
  d[0] = mine.embeddings, d[1] = mine.block, d[2] = mine.head;
  groups_.world->all_reduce(t, {.op = comm::ReduceOp::avg})->wait();
  return {.embeddings = d[0], .block = d[1], .head = d[2]};
}

void GptMesh::start_data_parallel(const parallel::DdpOptions& opts) {
  if (groups_.dp) ddp_ = std::make_unique<parallel::DistributedDataParallel>(shard_->named_parameters(), *groups_.dp, opts);
}

double GptMesh::forward_backward(const data::Batch& batch) {
  const int M = static_cast<int>(cfg_.micro_batches);
  const int64_t rows = batch.x.size(0) / M;
  double loss_sum = 0;
  parallel::StageFunctions fns;
  fns.forward = [&](int mb, const Variable& input) {
    Variable out = shard_->forward(batch.x.slice0(mb * rows, (mb + 1) * rows), input,
                                   batch.y.slice0(mb * rows, (mb + 1) * rows));
    if (!shard_->last_stage()) return out;
    loss_sum += out.item();
    return M == 1 ? out : autograd::mul(out, 1.0f / static_cast<float>(M));
  };
  if (ddp_) fns.no_sync = [this] { return std::make_shared<parallel::DistributedDataParallel::NoSync>(*ddp_); };
  const int64_t base = live_tensor_bytes();
  reset_peak_tensor_bytes();
  const int P = static_cast<int>(cfg_.pp);
  parallel::PipelineRunStats run = executor_->run(parallel::make_schedule(schedule_, M, P, groups_.coord.pp), fns);
  stats_.peak_live_micro_batches = std::max(stats_.peak_live_micro_batches, run.peak_live_micro_batches);
  stats_.peak_activation_bytes = std::max(stats_.peak_activation_bytes, peak_tensor_bytes() - base);
  return loss_sum / M;
}

double GptMesh::sync_gradients() {
  double exposed = ddp_ ? ddp_->finish().count() : 0.0;
  if (groups_.embedding && tied_embedding_.defined()) {
    Clock::time_point t0 = Clock::now();
    groups_.embedding->all_reduce(tied_embedding_.grad())->wait();  // both copies get the whole gradient
    exposed += seconds_since(t0);
  }
  return exposed;
}

double GptMesh::reported_loss(double local) {
  scalar_.data<double>()[0] = holds_loss() ? local : 0.0;
  groups_.world->all_reduce(scalar_.slice0(0, 1))->wait();
  return scalar_.data<double>()[0] / groups_.topology.degree(parallel::Axis::dp);
}

// Each parameter once: replicated ones on tensor-parallel rank 0, the tied
// embedding on the first stage.
bool GptMesh::counts_in_norm(const std::string& name) const {
  if (parallel::shard_kind(name) == parallel::ShardKind::replicated && shard_->tp_rank() != 0) return false;
  return !(parallel::is_tied_embedding(name) && !shard_->first_stage());
}

void GptMesh::clip_grad_norm(float max_norm) {
  double squares = 0;
  nn::NamedParameters params = shard_->named_parameters();
  for (auto& [name, p] : params) {
    if (!p.grad().defined() || !counts_in_norm(name)) continue;
    const float* g = p.grad().data<float>();
    for (int64_t i = 0; i < p.grad().numel(); ++i) squares += static_cast<double>(g[i]) * g[i];
  }
  scalar_.data<double>()[0] = squares;
  if (groups_.replica) groups_.replica->all_reduce(scalar_.slice0(0, 1))->wait();
  const float norm = static_cast<float>(std::sqrt(scalar_.data<double>()[0]));
  const float coef = max_norm / (norm + 1e-6f);
  if (!(coef < 1.0f)) return;
  for (auto& [name, p] : params) {
    if (!p.grad().defined()) continue;
    Tensor g = p.grad();
    float* d = g.data<float>();
    for (int64_t i = 0; i < g.numel(); ++i) d[i] *= coef;
  }
}

EvalResult GptMesh::evaluate(const data::Dataset& ds, const EvalOptions& opts) {
  const bool was_training = shard_->is_training();
  shard_->eval();
  trace::set_step(-1);  // evaluation's forwards are no step's
  autograd::NoGradGuard no_grad;
  int64_t batches = ds.num_val_batches(opts.batch_size);
  if (opts.max_batches > 0) batches = std::min(batches, opts.max_batches);
  // Replica d evaluates batches d, d + dp, ...; the sums meet in one all-reduce.
  const int dp = groups_.topology.degree(parallel::Axis::dp);
  std::vector<data::Batch> mine;  // read once: the stage's forward and the receive's shape both need it
  for (int64_t i = groups_.coord.dp; i < batches; i += dp) mine.push_back(ds.val_batch(opts.batch_size, i));
  double loss_sum = 0, targets = 0;
  if (!mine.empty()) {
    parallel::StageFunctions fns;
    fns.forward = [&](int mb, const Variable& input) {
      const data::Batch& b = mine[static_cast<size_t>(mb)];
      Variable out = shard_->forward(b.x, input, b.y);
      if (shard_->last_stage()) {
        loss_sum += static_cast<double>(out.item()) * static_cast<double>(b.y.numel());
        targets += static_cast<double>(b.y.numel());
      }
      return out;
    };
    fns.activation_shape = [&](int mb) {
      return Shape{mine[static_cast<size_t>(mb)].x.size(0), cfg_.block_size, shard_->config().n_embd};
    };
    const int P = static_cast<int>(cfg_.pp);
    executor_->run(parallel::forward_only(static_cast<int>(mine.size()), P, groups_.coord.pp), fns);
  }
  shard_->train(was_training);
  scalar_.data<double>()[0] = holds_loss() ? loss_sum : 0.0;
  scalar_.data<double>()[1] = holds_loss() ? targets : 0.0;
  groups_.world->all_reduce(scalar_)->wait();
  ARTEL_CHECK(scalar_.data<double>()[1] > 0, "the validation split of ", ds.describe(), " is empty");
  EvalResult r;
  r.val_loss = scalar_.data<double>()[0] / scalar_.data<double>()[1];
  r.targets = static_cast<int64_t>(scalar_.data<double>()[1]);
  return r;
}

// Every (name, tensor) of replica 0's workers on rank 0, put back together:
// a tensor split over tensor-parallel ranks is joined from the ranks of the
// stage that owns it (the first stage for the tied embedding), a replicated
// one taken from that stage's tensor-parallel rank 0. `param_of` maps a key
// to the parameter whose split it follows ("" = a per-stage tensor, taken
// from whichever stage sent it: its name is unique).
comm::NamedTensors GptMesh::gather_to_root(const comm::NamedTensors& mine,
                                           const std::function<std::string(const std::string&)>& param_of) {
  if (groups_.coord.dp != 0) return {};
  std::vector<comm::NamedTensors> lists =
      groups_.replica ? comm::gather_named(*groups_.replica, mine) : std::vector<comm::NamedTensors>{mine};
  if (groups_.world->rank() != 0) return {};
  struct Part {
    int stage, tp;
    Tensor t;
  };
  std::vector<std::string> order;
  std::map<std::string, std::vector<Part>> parts;
  for (size_t r = 0; r < lists.size(); ++r) {
    parallel::Coord c = groups_.topology.coord_of(static_cast<int>(r));  // replica 0 holds world ranks 0 .. P·T-1
    for (auto& [name, t] : lists[r]) {
      if (!parts.count(name)) order.push_back(name);
      parts[name].push_back({c.pp, c.tp, t});
    }
  }
  comm::NamedTensors whole;
  for (const std::string& name : order) {
    const std::string param = param_of(name);
    const int owner = param.empty() ? -1 : parallel::stage_of(param, stages_);
    const bool scalar = parts[name].front().t.dim() == 0;  // step counts: never split
    const parallel::ShardKind kind = param.empty() || scalar ? parallel::ShardKind::replicated
                                                             : parallel::shard_kind(param);
    std::vector<Tensor> by_tp(static_cast<size_t>(shard_->tp_size()));
    for (const Part& p : parts[name])
      if (p.stage == owner || owner < 0) by_tp[static_cast<size_t>(p.tp)] = p.t;
    if (kind == parallel::ShardKind::replicated) by_tp.resize(1);
    for (const Tensor& t : by_tp) ARTEL_CHECK(t.defined(), "gathering the model: no worker sent all of ", name);
    whole.emplace_back(name, parallel::join_shards(by_tp, kind));
  }
  return whole;
}

void GptMesh::gather_into(models::Model& full) {
  comm::NamedTensors mine;
  for (auto& [name, p] : shard_->named_parameters()) mine.emplace_back(name, p.value());
  comm::NamedTensors whole = gather_to_root(mine, [](const std::string& n) { return n; });
  if (whole.empty()) return;
  nn::StateDict state(whole.begin(), whole.end());
  full.load_state_dict(state);
}

Checkpoint GptMesh::checkpoint(int64_t step, const optim::Optimizer& optimizer, const Compatibility& compat) {
  comm::NamedTensors mine;
  for (auto& [name, p] : shard_->named_parameters()) mine.emplace_back(kModel + name, p.value());
  for (auto& [key, t] : optimizer.state_dict()) mine.emplace_back(kOptim + key, t);
  // One dropout stream per stage, stored in stage order.
  mine.emplace_back(kRng + std::to_string(groups_.coord.pp), rng_tensor(shard_->dropout_rng().state()));
  comm::NamedTensors whole = gather_to_root(mine, [](const std::string& key) -> std::string {
    if (key.compare(0, 6, kModel) == 0) return key.substr(6);
    if (key.compare(0, 6, kOptim) == 0) return param_of_state(key.substr(6));
    return "";
  });
  Checkpoint ck;
  if (whole.empty()) return ck;
  ck.step = step;
  ck.sampler_position = step;
  ck.meta = compat.to_meta();
  std::map<std::string, Tensor> rngs;
  for (auto& [name, t] : whole) {
    if (name.compare(0, std::string(kRng).size(), kRng) == 0) rngs[name] = t;
    else ck.add(name, t);
  }
  for (size_t s = 0; s < stages_.size(); ++s) {
    auto it = rngs.find(kRng + std::to_string(s));
    ARTEL_CHECK(it != rngs.end(), "checkpoint of step ", step, ": stage ", s, " sent no dropout generator state");
    ck.rng.push_back(rng_state(it->second));
  }
  return ck;
}

int64_t GptMesh::restore(const Checkpoint& ck, optim::Optimizer& optimizer) {
  ARTEL_CHECK(ck.rng.size() == stages_.size(), "checkpoint ", ck.path, " holds ", ck.rng.size(),
              " dropout generator states, this pipeline has ", stages_.size(), " stages");
  ARTEL_CHECK(ck.sampler_position == ck.step, "checkpoint ", ck.path, ": sampler position ", ck.sampler_position,
              " differs from its step ", ck.step, " (not written by artel train)");
  const int part = shard_->tp_rank(), parts = shard_->tp_size();
  std::set<std::string> mine;
  for (auto& [name, p] : shard_->named_parameters()) {
    Tensor t = parallel::take_shard(ck.get(kModel + name), parallel::shard_kind(name), part, parts);
    ARTEL_CHECK(t.shape() == p.value().shape(), "checkpoint ", ck.path, ": ", name, " has the wrong shape for this shard");
    p.value().copy_from(t);
    mine.insert(name);
  }
  optim::OptimizerState state;
  const std::string prefix = kOptim;
  for (const auto& [key, t] : ck.tensors) {
    if (key.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string k = key.substr(prefix.size()), param = param_of_state(k);
    if (!mine.count(param)) continue;
    state[k] = is_step_count(k) ? t : parallel::take_shard(t, parallel::shard_kind(param), part, parts);
  }
  optimizer.load_state_dict(state);
  shard_->dropout_rng().set_state(ck.rng[static_cast<size_t>(groups_.coord.pp)]);
  return ck.step;
}

nlohmann::json GptMesh::layout() const {
  const parallel::Topology& t = groups_.topology;
  return {{"world", t.world()},
          {"dp", t.degree(parallel::Axis::dp)},
          {"pp", t.degree(parallel::Axis::pp)},
          {"tp", t.degree(parallel::Axis::tp)}};
}

std::string GptMesh::describe() const {
  const parallel::Topology& t = groups_.topology;
  std::string s = detail::concat("dp ", t.degree(parallel::Axis::dp), " x pp ", t.degree(parallel::Axis::pp), " x tp ",
                                 t.degree(parallel::Axis::tp), "; ", cfg_.micro_batches, " micro-batch(es) of ",
                                 cfg_.batch_size / cfg_.micro_batches, " rows, ", cfg_.schedule, "; blocks per stage");
  for (const parallel::BlockRange& r : stages_) s += detail::concat(" [", r.first, ",", r.last, ")");
  if (measured_) {
    char costs[160];
    std::snprintf(costs, sizeof costs, ", balanced by measured ms per micro-batch: embeddings %.3f, block %.3f, head %.3f",
                  measured_->embeddings, measured_->block, measured_->head);
    s += costs;
  }
  return s;
}

}  // namespace artel::train
