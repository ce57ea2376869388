#include "artel/train/model_mesh.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <utility>

#include "artel/autograd/ops.h"
#include "artel/core/error.h"
#include "artel/core/memory_stats.h"
#include "artel/optim/clip.h"
#include "artel/models/model.h"
#include "artel/nn/init.h"
#include "artel/nn/safetensors.h"
#include "artel/train/powersgd_parts.h"
#include "artel/train/recipe.h"

namespace artel::train {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

void check_mesh(const TrainConfig& cfg, int world) {
  cfg.validate();
  parallel::Topology::for_world(world, static_cast<int>(cfg.pp), static_cast<int>(cfg.tp));
  if (cfg.tp == 1 && cfg.pp == 1) return;
  // The plan against the layout, on the declared model (nothing allocated).
  const int64_t classes = cfg.data.empty() ? 0 : data::open_dataset(cfg.data, dataset_options(cfg))->num_classes();
  std::unique_ptr<models::Model> model = models::declare_model(make_model_config(cfg, classes));
  if (cfg.tp > 1 && model->plan().tensor_parallel.empty())
    throw Error("--tp " + std::to_string(cfg.tp) + ": model " + cfg.model + " declares no tensor-parallel split",
                "use --pp or data parallelism for it, or declare its splits in its plan");
  const std::vector<bool> layers = parallel::piece_layers(*model);
  std::vector<parallel::PieceRange> stages;
  if (cfg.pp > 1) {
    const std::vector<int64_t> counts = cfg.stage_layer_counts();
    stages = counts.empty() ? parallel::balanced_stages(layers, parallel::piece_parameter_counts(*model),
                                                        static_cast<int>(cfg.virtual_stages()))
                            : parallel::explicit_stages(layers, counts);
  }
  parallel::ModelShard(*model, {.stages = stages, .stage = 0, .tp_degree = static_cast<int>(cfg.tp),
                                .chunks = static_cast<int>(cfg.chunks), .sequence_parallel = cfg.sequence_parallel});
}

ModelMesh::ModelMesh(const TrainConfig& cfg, parallel::MeshGroups groups, parallel::DdpOptions ddp)
    : cfg_(cfg), groups_(std::move(groups)), ddp_options_(std::move(ddp)),
      schedule_(parallel::parse_schedule_kind(cfg.schedule)) {
  // The groups were made for a mesh (make_mesh_groups) and the config
  // describes one: they must be the same, or a stage waited for a link its
  // groups never made ("stage 0 of 2 needs a two-rank ... group").
  const int pp = groups_.topology.degree(parallel::Axis::pp), tp = groups_.topology.degree(parallel::Axis::tp);
  ARTEL_CHECK(cfg.pp == pp && cfg.tp == tp, "ModelMesh: the config asks for pp ", cfg.pp, " x tp ", cfg.tp,
              ", but the groups were made for pp ", pp, " x tp ", tp,
              " (hint: pass the config's pp and tp to parallel::make_mesh_groups)");
  scalar_ = Tensor::zeros({2}, DType::f64);
}

ModelMesh::~ModelMesh() = default;

bool ModelMesh::holds_loss() const { return shard_->last_stage() && shard_->tp_rank() == 0; }

nn::NamedParameters ModelMesh::build(nn::Model& model, const data::Dataset& data, uint64_t seed,
                                     const std::string& init) {
  model_ = &model;
  data_classes_ = data.num_classes();
  const int P = static_cast<int>(cfg_.pp);
  layers_ = parallel::piece_layers(model);
  stages_ = partition(model, data);
  const int stage = groups_.coord.pp;
  shard_ = std::make_unique<parallel::ModelShard>(
      model, parallel::ShardPlace{.stages = stages_, .stage = stage, .tp = groups_.tp.get(),
                                  .chunks = static_cast<int>(cfg_.chunks),
                                  .sequence_parallel = cfg_.sequence_parallel});
  if (init.empty()) {
    shard_->materialize(seed);
  } else {
    // Only the tensors this worker holds parts of are read, one at a time.
    const nn::SafetensorsReader file(init);
    check_init_holds_only(file, model);
    const std::map<std::string, std::string> aliases = model.aliases();
    shard_->load([&](const std::string& name) { return read_init(file, aliases, name); });
  }
  model.train(true);
  executor_ = std::make_unique<parallel::PipelineExecutor>(stage, P, groups_.links, static_cast<int>(cfg_.chunks));
  for (auto& [name, p] : shard_->tied()) {
    const std::vector<int>& at = shard_->placement(name).stages;
    ARTEL_CHECK(at.size() == 2 && at.front() == 0 && at.back() == P - 1, "pipeline: ", name,
                " is used by stages other than the first and the last; only a weight tied across those two "
                "(a language model's embedding and head) is supported");
    tied_.push_back(p);
  }
  params_ = shard_->parameters();
  return params_;
}

// --stage-layers: explicit counts, or balanced by parameters (the default) or
// by measured cost; over the P·chunks virtual stages under the interleaved
// schedule.
std::vector<parallel::PieceRange> ModelMesh::partition(nn::Model& model, const data::Dataset& data) {
  const int P = static_cast<int>(cfg_.virtual_stages());
  const std::vector<int64_t> counts = cfg_.stage_layer_counts();
  if (!counts.empty()) return parallel::explicit_stages(layers_, counts);
  if (P == 1) return {};
  if (cfg_.stage_layers != "cost") return parallel::balanced_stages(layers_, parallel::piece_parameter_counts(model), P);
  measured_ = measured_costs(data);
  return parallel::balanced_stages(layers_, measured_, P);
}

// Every worker times each piece's forward + backward on one micro-batch, on
// the declared model before it is sharded, its pieces given weights one at a
// time (drawn for the piece, dropped after it), so timing never holds more
// than one piece's parameters; the dropout generator is put back after. The
// average over the world is used, so all of them cut the model the same way.
// The fastest of the repeats counts: the work is the same every call, so
// anything above it is the machine.
std::vector<double> ModelMesh::measured_costs(const data::Dataset& data) {
  const nn::ParallelPlan& plan = model_->plan();
  std::map<std::string, nn::Module*> modules;
  for (const auto& [path, m] : model_->named_modules()) modules[path] = m;
  const std::optional<RngState> dropout =
      model_->dropout_rng() ? std::optional(model_->dropout_rng()->state()) : std::nullopt;
  auto weights_of = [&](const nn::Piece& piece, bool draw) {
    for (const std::string& path : piece.modules) {
      nn::Module& m = *modules.at(path);
      if (draw) {
        nn::materialize(m, static_cast<uint64_t>(cfg_.seed));  // values do not matter, only the work
        continue;
      }
      for (auto& [name, p] : m.named_parameters()) {
        p.zero_grad();
        p.value() = Tensor();
      }
    }
  };
  const data::Batch batch = data.val_batch(cfg_.batch_size / cfg_.micro_batches, 0);
  Rng rng(static_cast<uint64_t>(cfg_.seed), /*stream=*/0xC057);
  std::vector<Tensor> in = {batch.x};
  Tensor t = Tensor::zeros({static_cast<int64_t>(plan.pieces.size())}, DType::f64);
  for (size_t i = 0; i < plan.pieces.size(); ++i) {
    weights_of(plan.pieces[i], true);
    nn::Activations inputs;
    for (const Tensor& v : in) inputs.emplace_back(v, v.dtype() == DType::f32);
    double best = 1e300;
    for (int r = 0; r < 6; ++r) {  // one warm-up, then the fastest of five
      auto t0 = std::chrono::steady_clock::now();
      nn::Activations out = plan.pieces[i].forward(inputs);
      for (const Variable& o : out)
        if (o.defined() && o.requires_grad()) {
          Tensor g = Tensor::empty(o.shape());
          nn::init::normal(g, 0.0f, 1.0f, rng);
          o.backward(g);
        }
      if (r > 0) best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      if (r == 5) {  // the next piece's input, without this piece's graph
        in.clear();
        for (const Variable& o : out) in.push_back(o.value());
      }
    }
    t.data<double>()[i] = best;
    weights_of(plan.pieces[i], false);
  }
  if (dropout) model_->dropout_rng()->set_state(*dropout);
  groups_.world->all_reduce(t, {.op = comm::ReduceOp::avg})->wait();
  return std::vector<double>(t.data<double>(), t.data<double>() + t.numel());
}

std::vector<parallel::PieceRange> ModelMesh::stage_layers() const {
  if (stages_.empty()) return {{0, static_cast<int64_t>(std::count(layers_.begin(), layers_.end(), true))}};
  return parallel::layers_of(layers_, stages_);
}

std::string ModelMesh::layers_of_stage(int stage) const {
  return parallel::stage_runs(stage_layers(), static_cast<int>(cfg_.pp), stage);
}


// ZeRO-1 / 2 over the data-parallel group (--zero) as for data parallelism
// alone; a tied weight keeps a replicated step (DdpOptions::replicate), as its
// averaged gradient is summed with the other stage's copy, whole.
void ModelMesh::attach(optim::Optimizer& optimizer) {
  if (!groups_.dp) return keep_gradients_in_place(shard_->parameters());
  parallel::DdpOptions opts = ddp_options_;
  opts.shard_optimizer = cfg_.zero >= 1;
  opts.shard_gradients = cfg_.zero >= 2;
  opts.replicate = [this](const std::string& name) { return shard_->placement(name).stages.size() > 1; };
  ddp_ = std::make_unique<parallel::DistributedDataParallel>(shard_->parameters(), *groups_.dp, opts);
  ddp_->shard(optimizer);
}

// Keyed by the layout and this worker's place in it, its stage's layers
// included: the stage's parameters, and so PowerSGD's state, are those layers'.
std::vector<HeldPart> ModelMesh::held_parts(optim::Optimizer& optimizer) {
  std::vector<HeldPart> parts = Strategy::held_parts(optimizer);
  add_powersgd_parts(parts, ddp_.get(), powersgd_position(), groups_.coord.dp, false);
  return parts;
}

std::vector<HeldPart> ModelMesh::wanted_parts(optim::Optimizer& optimizer) {
  std::vector<HeldPart> parts = Strategy::wanted_parts(optimizer);
  add_powersgd_parts(parts, ddp_.get(), powersgd_position(), groups_.coord.dp, true);
  return parts;
}

bool ModelMesh::parts_restored(const std::vector<HeldPart>& wanted, const std::vector<bool>& found) {
  return restore_powersgd(ddp_.get(), powersgd_position(), groups_.coord.dp, wanted, found);
}

std::string ModelMesh::powersgd_position() const {
  const parallel::Topology& t = groups_.topology;
  return train::powersgd_position(t.degree(parallel::Axis::dp), t.degree(parallel::Axis::pp),
                                  t.degree(parallel::Axis::tp), groups_.coord.pp, layers_of_stage(groups_.coord.pp),
                                  groups_.coord.tp);
}

double ModelMesh::forward_backward(std::span<const data::Batch> micro_batches) {
  // A step's rows are the pipeline's micro-batches (validate refuses --accum with --pp / --tp).
  ARTEL_CHECK(micro_batches.size() == 1, "a mesh step takes one batch, got ", micro_batches.size());
  const data::Batch& batch = micro_batches[0];
  const int M = static_cast<int>(cfg_.micro_batches);
  const int64_t rows = batch.x.size(0) / M;
  double loss_sum = 0;
  parallel::StageFunctions fns;
  fns.forward = [&](int mb, int chunk, const nn::Activations& inputs) {
    nn::Activations in =
        shard_->starts_pipeline(chunk) ? nn::Activations{Variable(batch.x.slice0(mb * rows, (mb + 1) * rows))} : inputs;
    nn::Activations out = shard_->forward(in, chunk);
    if (!shard_->ends_pipeline(chunk)) return out;
    Variable loss = stage_loss(out.at(0), batch.y.slice0(mb * rows, (mb + 1) * rows));
    loss_sum += loss.item();
    return nn::Activations{M == 1 ? loss : autograd::mul(loss, 1.0f / static_cast<float>(M))};
  };
  if (ddp_) fns.no_sync = [this] { return std::make_shared<parallel::DistributedDataParallel::NoSync>(*ddp_); };
  const int64_t base = live_tensor_bytes();
  reset_peak_tensor_bytes();
  const int P = static_cast<int>(cfg_.pp);
  parallel::PipelineRunStats run = executor_->run(
      parallel::make_schedule(schedule_, M, P, groups_.coord.pp, static_cast<int>(cfg_.chunks)), fns);
  stats_.peak_live_micro_batches = std::max(stats_.peak_live_micro_batches, run.peak_live_micro_batches);
  stats_.peak_activation_bytes = std::max(stats_.peak_activation_bytes, peak_tensor_bytes() - base);
  return loss_sum / M;
}

Variable ModelMesh::stage_loss(const Variable& logits, const Tensor& targets) {
  if (cfg_.tp == 1 || model_->plan().vocab_parallel_logits.empty()) check_logits_cover(logits.value(), data_classes_);
  return shard_->loss(logits, targets);
}

double ModelMesh::sync_gradients() {
  double exposed = ddp_ ? ddp_->finish().count() : 0.0;
  if (groups_.embedding && !tied_.empty()) {
    Clock::time_point t0 = Clock::now();
    for (Variable& p : tied_) groups_.embedding->all_reduce(p.grad())->wait();  // every copy gets the whole gradient
    exposed += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  return exposed;
}

double ModelMesh::reported_loss(double local) {
  scalar_.data<double>()[0] = holds_loss() ? local : 0.0;
  groups_.world->all_reduce(scalar_.slice0(0, 1))->wait();
  return scalar_.data<double>()[0] / groups_.topology.degree(parallel::Axis::dp);
}

// Each parameter once: replicated ones on tensor-parallel rank 0, a tied
// weight on the first stage holding it.
bool ModelMesh::counts_in_norm(const std::string& name) const {
  const parallel::ParameterPlacement& p = shard_->placement(name);
  if (p.split.replicated() && shard_->tp_rank() != 0) return false;
  return p.stages.front() == shard_->stage();
}

// optim's one clipping rule: each element of the model counted once — over
// the replica (tensor-parallel copies and tied copies counted where
// counts_in_norm says), and over the data-parallel ranks too when the step
// is sharded (each rank then holds its own block of the averaged gradients).
void ModelMesh::clip_grad_norm(float max_norm) {
  std::vector<optim::GradSpan> counted;
  for (optim::GradSpan& s : ddp_ ? ddp_->averaged_gradients(true) : optim::gradient_spans(shard_->parameters(), false))
    if (counts_in_norm(s.name)) counted.push_back(s);
  comm::ProcessGroup* over = ddp_ && ddp_->sharded_gradients() ? groups_.world.get() : groups_.replica.get();
  const float norm = optim::global_grad_norm(counted, [&](double sq) {
    scalar_.data<double>()[0] = sq;
    if (over) over->all_reduce(scalar_.slice0(0, 1))->wait();
    return scalar_.data<double>()[0];
  });
  clip_scale_ = optim::clip_coefficient(norm, max_norm);
}

double ModelMesh::optimizer_step(optim::Optimizer& optimizer) {
  const float scale = std::exchange(clip_scale_, 1.0f);
  if (ddp_) return ddp_->step(optimizer, scale).count();
  optimizer.step(scale);
  return 0.0;
}

namespace {

// A forward-only pass (evaluation, sampling) runs without sequence
// parallelism's token split: any batch or prompt length, the same results.
class WholeTokens {
 public:
  explicit WholeTokens(parallel::ModelShard& shard) : shard_(shard) { shard_.split_tokens(false); }
  ~WholeTokens() { shard_.split_tokens(true); }
  WholeTokens(const WholeTokens&) = delete;
  WholeTokens& operator=(const WholeTokens&) = delete;

 private:
  parallel::ModelShard& shard_;
};

}  // namespace

EvalResult ModelMesh::evaluate(const data::Dataset& ds, const EvalOptions& opts) {
  nn::EvalMode eval_mode(*model_);
  WholeTokens whole(*shard_);
  autograd::NoGradGuard no_grad;
  int64_t batches = ds.num_val_batches(opts.batch_size);
  if (opts.max_batches > 0) batches = std::min(batches, opts.max_batches);
  // Replica d evaluates batches d, d + dp, ...; the sums meet in one all-reduce.
  const int dp = groups_.topology.degree(parallel::Axis::dp);
  std::vector<data::Batch> mine;
  for (int64_t i = groups_.coord.dp; i < batches; i += dp) mine.push_back(ds.val_batch(opts.batch_size, i));
  EvalSums sums;
  if (!mine.empty()) {
    parallel::StageFunctions fns;
    fns.forward = [&](int mb, int chunk, const nn::Activations& inputs) {
      const data::Batch& b = mine[static_cast<size_t>(mb)];
      nn::Activations out = shard_->forward(shard_->starts_pipeline(chunk) ? nn::Activations{Variable(b.x)} : inputs, chunk);
      if (!shard_->ends_pipeline(chunk)) return out;
      const Variable loss = stage_loss(out.at(0), b.y);
      const auto n = static_cast<double>(b.y.numel());
      sums.loss += static_cast<double>(loss.item()) * n;
      sums.targets += n;
      if (opts.accuracy) sums.correct += static_cast<double>(count_correct(out.at(0).value(), b.y));
      return nn::Activations{loss};
    };
    executor_->run(parallel::forward_only(static_cast<int>(mine.size()), static_cast<int>(cfg_.pp), groups_.coord.pp,
                                          static_cast<int>(cfg_.chunks)),
                   fns);
  }
  return eval_result(sum_over(*groups_.world, holds_loss() ? sums : EvalSums{}), ds, opts.accuracy);
}

// Every (name, parameter part) of replica 0's workers on rank 0, put back
// together: a parameter split over tensor-parallel ranks is joined from the
// ranks of the stage that owns it (the first stage for the tied embedding),
// a replicated one taken from that stage's tensor-parallel rank 0.
comm::NamedTensors ModelMesh::gather_to_root(const comm::NamedTensors& mine) {
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
    const parallel::ParameterPlacement& where = shard_->placement(name);
    std::vector<Tensor> by_tp(static_cast<size_t>(shard_->tp_size()));
    for (const Part& p : parts[name])
      if (p.stage == where.stages.front()) by_tp[static_cast<size_t>(p.tp)] = p.t;
    if (where.split.replicated()) by_tp.resize(1);
    for (const Tensor& t : by_tp) ARTEL_CHECK(t.defined(), "gathering the model: no worker sent all of ", name);
    // Written, not kept: a part that is the whole parameter (replicated, or
    // split over one rank, as GPT-2's 147 MiB wte without tensor parallelism)
    // goes to the file as it came, uncopied.
    const bool entire = where.split.replicated() || (by_tp.size() == 1 && by_tp[0].shape() == where.shape);
    whole.emplace_back(name, entire ? by_tp[0] : nn::join_parts(by_tp, where.split, where.shape));
  }
  return whole;
}

void ModelMesh::write_weights(const std::string& path, const std::map<std::string, std::string>& metadata) {
  constexpr int64_t kBatchBytes = 64 << 20;  // whole tensors gathered on the reporter at once, at most (or one)
  const std::vector<parallel::ParameterPlacement>& all = shard_->placements();
  std::unique_ptr<nn::SafetensorsWriter> file;
  if (groups_.world->rank() == 0) {
    std::map<std::string, std::pair<DType, Shape>> layout;
    for (const parallel::ParameterPlacement& p : all) layout[p.name] = {DType::f32, p.shape};
    file = std::make_unique<nn::SafetensorsWriter>(path, layout, metadata);
  }
  std::map<std::string, Tensor> held;
  for (auto& [name, p] : shard_->parameters()) held[name] = p.value();
  for (size_t first = 0; first < all.size();) {
    size_t last = first;
    int64_t bytes = 0;
    while (last < all.size() && (last == first || bytes + shape_numel(all[last].shape) * 4 <= kBatchBytes))
      bytes += shape_numel(all[last++].shape) * 4;
    comm::NamedTensors mine;
    // A part is sent once: a weight tied across stages by its first stage, a
    // replicated one by tensor-parallel rank 0. The last stage's copy of
    // GPT-2's wte was 154 MiB more on rank 0 for nothing.
    for (size_t i = first; i < last; ++i) {
      const bool sender =
          all[i].stages.front() == shard_->stage() && (!all[i].split.replicated() || shard_->tp_rank() == 0);
      if (auto it = held.find(all[i].name); it != held.end() && sender) mine.emplace_back(it->first, it->second);
    }
    const comm::NamedTensors whole = gather_to_root(mine);
    for (const auto& [name, t] : whole) file->write(name, t);
    first = last;
  }
  if (file) file->commit();
}

// One forward of `ids` through the pipeline; the last stage's tensor-parallel
// ranks gather the last position's logits, and an all-reduce in which every
// other worker adds zeros hands them to all (each replica runs the same).
std::vector<float> ModelMesh::next_token_logits(const Tensor& ids) {
  WholeTokens whole(*shard_);
  std::vector<float> row;
  parallel::StageFunctions fns;
  fns.forward = [&](int, int chunk, const nn::Activations& inputs) {
    nn::Activations out = shard_->forward(shard_->starts_pipeline(chunk) ? nn::Activations{Variable(ids)} : inputs, chunk);
    if (shard_->ends_pipeline(chunk)) row = shard_->last_logits(out.at(0));
    return out;
  };
  executor_->run(parallel::forward_only(1, static_cast<int>(cfg_.pp), groups_.coord.pp, static_cast<int>(cfg_.chunks)),
                 fns);
  const int64_t vocab = data_classes_;
  Tensor t = Tensor::zeros({vocab});
  if (holds_loss() && groups_.coord.dp == 0) std::copy(row.begin(), row.end(), t.data<float>());
  groups_.world->all_reduce(t)->wait();
  return std::vector<float>(t.data<float>(), t.data<float>() + vocab);
}

std::vector<ParameterHolding> ModelMesh::holdings(const optim::Optimizer& optimizer) const {
  const bool sharded_step = ddp_ && cfg_.zero == 1;
  std::vector<ParameterHolding> out;
  for (auto& [name, p] : shard_->parameters()) {
    const parallel::ParameterPlacement& where = shard_->placement(name);
    ParameterHolding h{.name = name, .value = p.value(), .whole = where.shape, .split = where.split,
                       .part = shard_->tp_rank(), .parts = shard_->tp_size()};
    // This worker's copy is the one of its replica that counts (as for the norm).
    const bool counts = counts_in_norm(name);
    const bool tied = where.stages.size() > 1;  // its step stays replicated (attach)
    const bool first_replica = groups_.coord.dp == 0;
    if (counts && sharded_step && !tied) {
      h.weights = optimizer.owned(name);
      h.writes_state = true;
    } else if (counts && first_replica) {
      h.weights = {0, p.numel()};
      h.writes_state = true;
    }
    h.writes_step = counts && first_replica && shard_->tp_rank() == 0;  // the count is the parameter's, not a part's
    out.push_back(std::move(h));
  }
  return out;
}

std::vector<std::pair<std::string, Tensor>> ModelMesh::checkpoint_buffers(const nn::Model& model, bool writing) const {
  if (writing && !writes_dropout()) return {};  // another replica's or tensor-parallel rank's copy
  const std::vector<nn::Piece>& pieces = model.plan().pieces;
  const std::vector<parallel::PieceRange> mine =
      stages_.empty() ? std::vector<parallel::PieceRange>{{0, static_cast<int64_t>(pieces.size())}}  // one stage
                      : shard_->held_pieces();
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [name, t] : model.named_buffers()) {
    int64_t piece = -1;  // the first piece whose modules hold it
    for (size_t i = 0; i < pieces.size() && piece < 0; ++i)
      for (const std::string& m : pieces[i].modules)
        if (nn::path_within(name, m)) piece = static_cast<int64_t>(i);
    const bool held = std::any_of(mine.begin(), mine.end(), [&](const parallel::PieceRange& r) {
      return r.first <= piece && piece < r.last;
    });
    if (piece < 0 ? stage() == 0 : held) out.emplace_back(name, t);
  }
  return out;
}

int64_t ModelMesh::communication_bytes() const {
  const parallel::MeshGroups& g = groups_;
  const parallel::PipelineLinks& l = g.links;
  std::set<const comm::ProcessGroup*> seen;
  int64_t n = 0;
  for (const auto& p : {g.world, g.tp, g.dp, g.replica, g.embedding, l.activations_from_prev, l.grads_to_prev,
                        l.activations_to_next, l.grads_from_next})
    if (p && seen.insert(p.get()).second) n += p->allocated_bytes();
  return n - (ddp_ ? ddp_->registered_bucket_bytes() : 0);  // the buckets are the gradients (and weights)
}

nlohmann::json ModelMesh::layout() {
  const parallel::Topology& t = groups_.topology;
  return {{"world", t.world()},
          {"dp", t.degree(parallel::Axis::dp)},
          {"pp", t.degree(parallel::Axis::pp)},
          {"tp", t.degree(parallel::Axis::tp)}};
}

std::string ModelMesh::describe() const {
  const parallel::Topology& t = groups_.topology;
  std::string s = detail::concat("dp ", t.degree(parallel::Axis::dp), " x pp ", t.degree(parallel::Axis::pp), " x tp ",
                                 t.degree(parallel::Axis::tp), cfg_.sequence_parallel ? " sequence-parallel" : "", "; ",
                                 cfg_.micro_batches, " micro-batch(es) of ",
                                 cfg_.batch_size / cfg_.micro_batches, " rows, ", cfg_.schedule,
                                 cfg_.chunks > 1 ? detail::concat(" x", cfg_.chunks, " chunks") : "",
                                 "; layers per stage");
  for (int st = 0; st < t.degree(parallel::Axis::pp); ++st) s.append(" ").append(layers_of_stage(st));
  if (!measured_.empty()) {
    s += ", balanced by measured ms per micro-batch:";
    const std::vector<nn::Piece>& pieces = model_->plan().pieces;
    for (size_t i = 0; i < measured_.size(); ++i) {
      char cost[96];
      std::snprintf(cost, sizeof cost, "%s %s %.3f", i ? "," : "", pieces[i].name.c_str(), measured_[i]);
      s += cost;
    }
  }
  return s;
}

}  // namespace artel::train
