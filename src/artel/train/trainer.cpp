#include "artel/train/trainer.h"

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "artel/autograd/ops.h"
#include "artel/comm/gather_strings.h"
#include "artel/core/error.h"
#include "artel/core/memory_limit.h"
#include "artel/core/memory_stats.h"
#include "artel/core/threads.h"
#include "artel/core/trace.h"
#include "artel/kernels/attention.h"
#include "artel/kernels/gemm.h"
#include "artel/kernels/gemm_bf16.h"
#include "artel/models/generate.h"
#include "artel/nn/safetensors.h"
#include "artel/optim/clip.h"
#include "artel/train/metrics_writer.h"
#include "artel/train/progress.h"
#include "artel/train/recipe.h"
#include "artel/train/rank_agreement.h"
#include "artel/train/resume_batch.h"
#include "artel/train/run_report.h"
#include "artel/train/run_checkpoint.h"

namespace artel::train {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// A float as the shortest decimal that reads back as it (1e-3f -> 0.001, not
// 0.0010000000474974513), so metrics show the learning rate a user typed.
double decimal(float v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::strtod(std::string(buf, end).c_str(), nullptr);
}

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }


std::string with_thousands(int64_t n) {
  std::string digits = std::to_string(n), s;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0 && digits[i - 1] != '-') s.push_back(',');
    s.push_back(digits[i]);
  }
  return s;
}

}  // namespace

Trainer::Trainer(TrainConfig cfg, RunOptions run, Strategy* strategy)
    : cfg_(std::move(cfg)), run_(std::move(run)), alone_(strategy ? nullptr : std::make_unique<Strategy>()),
      strategy_(strategy ? strategy : alone_.get()) {
  cfg_.validate();
  if (cfg_.data.empty()) throw Error("no data given", "pass --data PATH");
  data_ = open_run_data(cfg_);
  // Declared: a worker holding a shard materialises only that (Note [Model-parallel seams]).
  model_ = models::declare_model(make_model_config(cfg_, data_->num_classes()));
  start();
}

Trainer::Trainer(TrainConfig cfg, std::unique_ptr<nn::Model> model, std::unique_ptr<data::Dataset> data,
                 RunOptions run, Strategy* strategy)
    : cfg_(std::move(cfg)), run_(std::move(run)), alone_(strategy ? nullptr : std::make_unique<Strategy>()),
      strategy_(strategy ? strategy : alone_.get()), data_(std::move(data)), model_(std::move(model)) {
  cfg_.validate();
  ARTEL_CHECK(model_ && data_, "Trainer: a model and a dataset are needed");
  start();
}

void Trainer::start() {
  // Ranks started alike (rank_agreement.h). `artel train` checks before it
  // makes any group; a program of the user's own that builds a Trainer over
  // a world group is checked here, before the first collective (--steps
  // differing by rank trained on to a mismatched all-gather, a differing
  // --lr trained the replicas apart without a word).
  if (comm::ProcessGroup* world = strategy_->world_group(); world && world->size() > 1) check_ranks_agree(*world, cfg_);
  // Checkpoints are files too: the combination wrote none, without a word.
  ARTEL_CHECK(run_.write_files || cfg_.checkpoint_every == 0, "Trainer: checkpoint_every ", cfg_.checkpoint_every,
              " asks for checkpoints, but RunOptions::write_files is false (hint: let it write files, or set "
              "checkpoint_every = 0)");
  model_->set_recompute(nn::parse_recompute(cfg_.recompute));
  if (run_.set_threads) set_num_threads(cfg_.threads > 0 ? static_cast<int>(cfg_.threads) : available_cores());
  set_out_of_memory_hint(memory_hint_for(cfg_));
  kernels::set_gemm_library(kernels::parse_gemm_library(cfg_.gemm));
  kernels::set_gemm_precision(kernels::parse_gemm_precision(cfg_.precision));
  // Before the weights are made (seconds at GPT-2's size): a batch that does
  // not fit the data, a schedule that cannot run or a checkpoint directory
  // that is a file is refused at once.
  plan_data();
  if (cfg_.checkpoint_every > 0 || run_.resume)
    store_ = std::make_unique<CheckpointStore>(cfg_.out + "/checkpoints", cfg_.keep_checkpoints);
  if (cfg_.checkpoint_every > 0 && !run_.resume) refuse_earlier_checkpoints(store_->dir());
  {
    AllocationPurpose purpose("the model's parameters");
    trained_ = strategy_->build(*model_, *data_, static_cast<uint64_t>(cfg_.seed), cfg_.init);
  }
  optimizer_ = make_optimizer(cfg_, trained_);
  strategy_->attach(*optimizer_);
}

void Trainer::plan_data() {
  sampler_cfg_.order = data::parse_order(cfg_.data_order);
  sampler_cfg_.seed = static_cast<uint64_t>(cfg_.seed);
  sampler_cfg_.rank_batch = cfg_.batch_size;
  sampler_cfg_.world_size = strategy_->replicas() * cfg_.accum;
  sampler_cfg_.rank = strategy_->replica() * cfg_.accum;
  sampler_cfg_.row_offset = row_offset_;
  data::DistributedSampler sampler = data::make_sampler(*data_, sampler_cfg_);  // checks the batch fits the data
  total_steps_ = cfg_.epochs > 0 ? cfg_.epochs * sampler.steps_per_epoch() : cfg_.steps;
  schedule_ = make_schedule(cfg_, total_steps_);
}

Trainer::~Trainer() = default;

std::ostream& Trainer::out() const { return run_.out ? *run_.out : std::cout; }

bool Trainer::text() const { return data_->kind() == data::DatasetKind::text; }

int64_t Trainer::items_per_step() const {
  return cfg_.accum * (text() ? cfg_.batch_size * cfg_.block_size : cfg_.batch_size);
}

void Trainer::announce() const {
  std::string per_step = text() ? std::to_string(cfg_.batch_size) + "x" + std::to_string(cfg_.block_size) + " tokens"
                                : std::to_string(cfg_.batch_size) + " samples";
  out() << "artel train: " << cfg_.model << ", " << with_thousands(model_->num_parameters()) << " parameters"
        << (cfg_.init.empty() ? "" : " from " + cfg_.init) << "\n"
        << "  data   " << data_->describe() << " (" << cfg_.data_order << ")\n"
        << "  run    " << total_steps_ << " steps of " << per_step << " per worker x " << strategy_->replicas()
        << " worker(s)" << (cfg_.accum > 1 ? " x " + std::to_string(cfg_.accum) + " micro-steps" : "")
        << " = global batch " << global_batch() << "; " << cfg_.optimizer << " lr " << cfg_.lr << " " << cfg_.lr_schedule << "; "
        << num_threads() << " thread(s), " << cfg_.gemm << " GEMM"
        << (cfg_.precision == "bf16" ? ", bf16 products on " + kernels::bf16_instructions() + " through " + kernels::bf16_kernel_name() +
                                           (kernels::attention_products_on_pairs() ? "" : " (attention's in fp32)")
                                     : "")
        << "\n";
  if (const std::string slower = kernels::bf16_slower_reason(); cfg_.precision == "bf16" && !slower.empty())
    out() << "  note   bf16 runs slower than fp32 here (--precision fp32 is the faster): " << slower << "\n";
  if (const std::string layout = strategy_->describe(); !layout.empty()) out() << "  layout " << layout << "\n";
  if (const std::string sync = strategy_->describe_sync(); !sync.empty())
    out() << "  sync   " << sync << "\n";
  if (run_.write_files) out() << "  out    " << cfg_.out << "/\n";
  out() << std::flush;
}

void Trainer::write_config_file() const {
  TrainConfig resolved = cfg_;
  resolved.steps = total_steps_;
  resolved.epochs = 0;
  std::ofstream f(cfg_.out + "/config.json");
  f << resolved.to_json().dump(2) << "\n";
  if (!f) throw Error("cannot write " + cfg_.out + "/config.json", "check that --out is writable");
}

// Weights under the single-worker names, written by the reporter; every
// worker calls this when the model is sharded (Strategy::write_weights).
void Trainer::save(const std::string& name, int64_t step) const {
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"model", cfg_.model}, {"step", std::to_string(step)}};
  strategy_->write_weights(cfg_.out + "/" + name, meta);
}

void Trainer::make_out_dir() const {
  std::error_code ec;
  std::filesystem::create_directories(cfg_.out, ec);
  if (ec) throw Error("cannot create --out " + cfg_.out + ": " + ec.message(), "pass a writable directory");
}

bool Trainer::due_for_eval(int64_t k) const {
  return k == total_steps_ || (cfg_.eval_every > 0 && k % cfg_.eval_every == 0);
}

StepResult Trainer::step(int64_t k, const data::Batch& batch) { return step(k, std::span<const data::Batch>(&batch, 1)); }

StepResult Trainer::step(int64_t k, std::span<const data::Batch> micro_batches) {
  Clock::time_point t0 = Clock::now();
  trace::set_step(k);
  strategy_->begin_step(k);
  StepResult r;
  r.lr = schedule_.at(k - 1);
  optimizer_->set_lr(r.lr);
  optimizer_->zero_grad();
  ARTEL_CHECK(!micro_batches.empty(), "step ", k, " got no micro-batches");
  const int64_t before = live_tensor_bytes();
  reset_peak_tensor_bytes();
  double local_loss;
  const Clock::time_point computing = Clock::now();
  {
    AllocationPurpose purpose("activations (forward and backward)");
    local_loss = strategy_->forward_backward(micro_batches);
  }
  if (run_.after_compute) run_.after_compute(k, ms_since(computing) / 1e3);
  const int64_t left = std::max<int64_t>(0, live_tensor_bytes() - before);  // what backward keeps: gradients
  memory_.activations = std::max(memory_.activations, peak_tensor_bytes() - before - left);
  {
    trace::Scope span("sync", "step", "compute");
    r.sync_ms = 1e3 * strategy_->sync_gradients();
  }
  memory_.gradients = std::max(memory_.gradients, strategy_->gradient_bytes());
  r.loss = strategy_->reported_loss(local_loss);
  if (!std::isfinite(r.loss))
    throw Error("loss is " + std::string(std::isnan(r.loss) ? "NaN" : "infinite") + " at step " + std::to_string(k) +
                    "; stopped before updating the weights",
                "the run diverged: lower --lr, set --grad-clip, or check --init and --data");
  if (cfg_.grad_clip > 0) strategy_->clip_grad_norm(static_cast<float>(cfg_.grad_clip));
  {
    trace::Scope span("optimizer", "step", "compute");
    r.sync_ms += 1e3 * strategy_->optimizer_step(*optimizer_);
  }
  memory_.keep_max({.parameters = strategy_->parameter_bytes(),
                    .optimizer_state = optimizer_->state_bytes(),
                    .communication = strategy_->communication_bytes(),
                    .gathered = strategy_->gathered_bytes()});
  r.comp_ms = ms_since(t0) - r.sync_ms;
  return r;
}

EvalResult Trainer::evaluate() {
  EvalOptions opts;
  opts.batch_size = cfg_.batch_size;
  opts.max_batches = cfg_.eval_batches;
  opts.accuracy = !text();
  trace::set_step(-1);  // an evaluation's ops and collectives are no step's: they stay out of the step summary
  return strategy_->evaluate(*data_, opts);
}

Compatibility Trainer::compatibility() const {
  Compatibility c = run_compatibility(cfg_, model_vocab(cfg_, data_->num_classes()));
  for (const nn::DeclaredParameter& d : model_->declared_parameters()) c.parameters[d.name] = d.shape;
  for (const auto& [name, t] : model_->named_buffers()) c.buffers[name] = detail::concat(dtype_name(t.dtype()), " ", shape_str(t.shape()));
  c.optimizer = {{"name", cfg_.optimizer}, {"state", optimizer_->buffer_kinds()}};
  return c;
}

nlohmann::json Trainer::layout_record() {
  nlohmann::json layout = strategy_->layout();
  layout["zero"] = cfg_.zero;
  layout["batch_size"] = cfg_.batch_size;
  layout["accum"] = cfg_.accum;
  layout["micro_batches"] = cfg_.micro_batches;
  layout["seed"] = cfg_.seed;  // what the batches after the checkpoint follow from
  layout["train_items"] = data_->num_train_items();
  return layout;
}

// Each token's logits come from the strategy: the whole model's forward, or
// one through the shards (every worker of a mesh runs this).
std::string Trainer::sample(int64_t chars) {
  auto* corpus = dynamic_cast<const data::TextDataset*>(data_.get());
  ARTEL_CHECK(corpus, "only a model trained on text can generate text, this is ", cfg_.model);
  std::vector<int64_t> prompt = {corpus->first_token()};
  Rng rng(static_cast<uint64_t>(cfg_.seed), models::kSampleStream);
  autograd::NoGradGuard no_grad;
  nn::EvalMode eval_mode(*model_);
  const models::SamplingOptions opts{.temperature = static_cast<float>(cfg_.temperature),
                                     .context = cfg_.block_size,
                                     .vocab = data_->num_classes()};
  std::vector<int64_t> ids = models::generate(prompt, chars, opts, rng,
                                              [&](const Tensor& in) {
                                                std::vector<float> logits = strategy_->next_token_logits(in);
                                                logits.resize(static_cast<size_t>(opts.vocab));  // no padding rows
                                                return logits;
                                              });
  return corpus->decode(std::span<const int64_t>(ids).subspan(prompt.size()));
}

std::unique_ptr<MetricsWriter> Trainer::start_files(int64_t first_step) const {
  make_out_dir();
  write_config_file();
  if (first_step == 1) {
    if (!strategy_->sharded()) save("init.safetensors", 0);  // else every worker wrote it already
    return std::make_unique<MetricsWriter>(cfg_.out + "/metrics.jsonl");
  }
  return std::make_unique<MetricsWriter>(cfg_.out + "/metrics.jsonl", first_step - 1);
}

// Newest first; a checkpoint counts when every worker opened it and read its
// parts (they agree on both, so all of them resume from the same one).
int64_t Trainer::resume_step() {
  const Compatibility compat = compatibility();
  auto warn = [&](const std::string& w) {
    if (strategy_->reporter()) out() << "artel train: " << w << "\n";
  };
  std::vector<std::string> all = checkpoints_newest_first(store_->dir());
  if (comm::ProcessGroup* world = strategy_->world_group()) all = checkpoints_every_rank_sees(*world, all, store_->dir(), warn);
  // The newest complete checkpoint's problem while none has been used: a
  // restore that failed has written some weights and optimizer state, and a
  // fresh start would train on that mix and overwrite the checkpoints.
  std::string unusable;
  auto skip = [&](const std::string& path, const std::string& problem, const std::string& next) {
    warn(skipping_line(problem, next));
    if (unusable.empty() && std::filesystem::exists(std::filesystem::path(path) / kManifestName)) unusable = problem;
  };
  for (size_t i = 0; i < all.size(); ++i) {
    const std::string next = i + 1 < all.size() ? all[i + 1] : "";
    std::unique_ptr<ShardedCheckpoint> ck;
    std::string problem;
    try {
      ck = std::make_unique<ShardedCheckpoint>(all[i]);
    } catch (const Error& e) {
      problem = problem_of(e);
    }
    if (!strategy_->all_agree(ck != nullptr)) {
      problem = first_problem(problem);
      skip(all[i], problem.empty() ? "checkpoint " + all[i] + ": another worker could not open it" : problem, next);
      continue;
    }
    check_compatible(ck->manifest().model, compat, (std::filesystem::path(all[i]) / kManifestName).string());
    const RestoreOutcome r = restore_run_checkpoint(*strategy_, *optimizer_, *model_, *ck);
    if (!r.ok) {
      problem = first_problem(r.problem);
      skip(all[i], problem.empty() ? "checkpoint " + all[i] + ": another worker could not read its parts" : problem, next);
      continue;
    }
    return continue_from(*ck, r);
  }
  // Only torn checkpoints (no manifest: a write that never finished) leave a fresh start.
  if (const std::string why = first_problem(unusable); !why.empty())
    throw Error("resume: no checkpoint in " + store_->dir() + " could be restored, the newest complete one: " + why,
                "it is damaged; restore it from a copy, or move " + store_->dir() + " away to start afresh");
  if (strategy_->reporter()) out() << "artel train: no checkpoint in " << store_->dir() << "; starting at step 1\n";
  return 0;
}

// The problem of the first worker that had one with a checkpoint the
// workers agreed to skip (a collective, as that agreement was): the
// reporter's line names the file and what is wrong with it, whichever worker
// read it.
std::string Trainer::first_problem(const std::string& mine) {
  comm::ProcessGroup* world = strategy_->world_group();
  if (!world) return mine;
  const std::string kept = mine.substr(0, 2000);
  for (const std::string& p : comm::all_gather_strings(*world, kept, {.max_bytes = 2000, .what = "checkpoint problem"}))
    if (!p.empty()) return p;
  return "";
}

// The global batch and data position after checkpoint `ck`, and one line
// each for what differs from the run that wrote it.
int64_t Trainer::continue_from(const ShardedCheckpoint& ck, const RestoreOutcome& restored) {
  const Manifest& m = ck.manifest();
  const int64_t accum = cfg_.accum;
  cfg_.accum = accum_to_keep_global_batch(m.global_batch,
                                          {.replicas = strategy_->replicas(),
                                           .batch_size = cfg_.batch_size,
                                           .accum = cfg_.accum,
                                           .accum_given = cfg_.was_given("accum"),
                                           .mesh = cfg_.model_parallel(),
                                           .micro_batches = cfg_.micro_batches},
                                          ck.dir());
  row_offset_ = m.consumed_samples - m.step * global_batch();
  plan_data();
  check_steps_after(m.step, total_steps_, ck.dir());
  if (!strategy_->reporter()) return m.step;
  const nlohmann::json now = strategy_->layout();
  bool same_layout = true;
  for (const char* k : {"world", "dp", "pp", "tp"}) same_layout &= m.layout.value(k, json()) == now.value(k, json());
  out() << "artel train: resuming from " << ck.dir() << " (step " << m.step << ")";
  if (!same_layout) {
    const std::string mine = describe_layout(now);
    out() << ", written by " << describe_layout(m.layout) << ", read by " << mine.substr(0, mine.find(" worker"))
          << mine.substr(mine.find(" ("));
  }
  out() << "\n";
  if (const int64_t zero = m.layout.value("zero", int64_t{cfg_.zero}); zero != cfg_.zero)
    out() << "artel train: the checkpoint was written under --zero " << zero << ", this run goes on under --zero "
          << cfg_.zero << "\n";
  // Batches are functions of the seed and the data's size: with another, the
  // run goes on, but not through the batches the uninterrupted one would see.
  if (const int64_t seed = m.layout.value("seed", cfg_.seed); seed != cfg_.seed)
    out() << "artel train: the checkpoint was trained with --seed " << seed << ", this run draws its batches from --seed "
          << cfg_.seed << "\n";
  if (const int64_t items = m.layout.value("train_items", data_->num_train_items()); items != data_->num_train_items())
    out() << "artel train: the checkpoint was trained on " << items << " training items, this run's data has "
          << data_->num_train_items() << "\n";
  if (cfg_.accum != accum)
    out() << "artel train: keeping the checkpoint's global batch of " << m.global_batch << " with --accum " << cfg_.accum
          << "\n";
  if (global_batch() != m.global_batch)
    out() << "artel train: global batch " << global_batch() << " where the checkpoint's was " << m.global_batch
          << ": the data goes on from sample " << m.consumed_samples << "\n";
  if (!restored.dropout_restored && cfg_.dropout > 0)
    out() << "artel train: note: the checkpoint has dropout generators for " << m.dropout.size()
          << " pipeline stage(s), this run " << strategy_->stages()
          << "; they start afresh, so dropout masks differ from an uninterrupted run's\n";
  if (!restored.compressor_restored)
    out() << "artel train: note: the checkpoint holds no PowerSGD state for this layout and --powersgd-rank; it "
             "starts afresh (uncompressed for --powersgd-start-step steps), so the run differs from an uninterrupted "
             "one\n";
  return m.step;
}

void Trainer::maybe_checkpoint(int64_t k, MetricsWriter* metrics) {
  if (cfg_.checkpoint_every <= 0 || (k % cfg_.checkpoint_every != 0 && k != total_steps_)) return;
  strategy_->barrier();  // every worker finished step k: the shards are the state of all of them
  if (metrics) metrics->flush();  // the file holds every step the checkpoint holds
  const RunPosition pos{.step = k,
                        .consumed_samples = row_offset_ + k * global_batch(),
                        .global_batch = global_batch(),
                        .model = compatibility().to_meta(),
                        .layout = layout_record()};
  save_run_checkpoint(*strategy_, *optimizer_, *model_, *store_, pos);
}

void Trainer::train_steps(int64_t first_step, Progress& progress, MetricsWriter* metrics, RunSummary& summary) {
  // A loader thread builds batches ahead on a core the computation leaves
  // free. When the workers' threads take every core it would only preempt the
  // computation to do the same work (and pay the switches): build in next().
  const int64_t threads = cfg_.threads > 0 ? cfg_.threads : available_cores();
  const bool spare_core = strategy_->replicas() * threads < available_cores();
  std::vector<std::unique_ptr<data::DataLoader>> loaders;  // one per micro-step (Note [Micro-batches])
  for (int64_t m = 0; m < cfg_.accum; ++m) {
    data::SamplerConfig s = sampler_cfg_;  // its row offset included
    s.rank += m;
    loaders.push_back(std::make_unique<data::DataLoader>(
        *data_, s, data::LoaderConfig{.start_step = first_step - 1, .prefetch = spare_core ? 2 : 0}));
  }
  const double items = static_cast<double>(items_per_step() * strategy_->replicas());
  std::vector<data::Batch> micro(loaders.size());
  const Clock::time_point started = Clock::now();
  for (int64_t k = first_step; k <= total_steps_; ++k) {
    Clock::time_point t0 = Clock::now();
    trace::set_step(k);  // the batch is the step's
    {
      trace::Scope span("load", "step", "compute");
      for (size_t m = 0; m < loaders.size(); ++m) micro[m] = loaders[m]->next();
    }
    StepResult r = step(k, micro);
    const double ms = ms_since(t0);
    summary.losses.push_back(r.loss);
    summary.step_ms.push_back(ms);
    summary.steps = k;
    if (metrics) {
      StepMetrics m{.step = k, .loss = r.loss, .lr = decimal(r.lr), .items_per_s = items / (ms / 1e3),
                    .items_name = text() ? "tokens_per_s" : "samples_per_s", .step_ms = ms};
      if (strategy_->synchronises()) m.t_comp_ms = r.comp_ms, m.t_sync_ms = r.sync_ms;
      m.extra = strategy_->step_record();
      metrics->step(m);
    }
    if (strategy_->synchronises()) progress.step(k, r.loss, items / (ms / 1e3), r.comp_ms, r.sync_ms);
    else progress.step(k, r.loss, items / (ms / 1e3));
    maybe_checkpoint(k, metrics);
    if (run_.after_step) run_.after_step(k);
    // The reporter evaluates, or every worker together (Strategy::evaluates_together).
    if (!run_.evaluate || !due_for_eval(k) || (!strategy_->reporter() && !strategy_->evaluates_together())) continue;
    EvalResult e = evaluate();
    if (metrics)
      metrics->eval({.step = k, .val_loss = e.val_loss, .val_accuracy = e.val_accuracy, .elapsed_s = ms_since(started) / 1e3});
    progress.eval(k, e.val_loss, e.val_accuracy);
    if (k == total_steps_) summary.final_eval = e;
  }
}

RunSummary Trainer::run() {
  const bool report = strategy_->reporter();
  const bool files = report && run_.write_files;
  const int64_t first_step = 1 + (run_.resume ? resume_step() : 0);  // may choose accum: before announcing it
  if (report) announce();
  if (first_step == 1 && run_.write_files && strategy_->sharded()) {  // a collective: before only the reporter goes on
    if (report) make_out_dir();
    save("init.safetensors", 0);
  }
  std::unique_ptr<MetricsWriter> metrics = files ? start_files(first_step) : nullptr;
  std::ostringstream quiet;
  Progress progress({.total_steps = total_steps_,
                     .first_step = first_step,
                     .unit = text() ? "tok/s" : "samples/s",
                     .terminal = run_.terminal,
                     .log_every = cfg_.log_every},
                    report ? out() : quiet);
  RunSummary summary;
  try {
    train_steps(first_step, progress, metrics.get(), summary);
  } catch (...) {
    progress.finish();  // the error goes below the bar, not onto it
    throw;
  }
  progress.finish();
  // The steps are over: the buffers they freed and kept for the next step go
  // back, so that writing the weights (gathered to one worker when sharded)
  // and sampling do not stack on memory that no step will ask for again.
  release_freed_memory();
  // Every worker takes part in writing a sharded model's weights and in
  // sampling through it, so the conditions are the same on all.
  if (run_.write_files && (report || strategy_->sharded())) save("final.safetensors", total_steps_);
  if (files) out() << "wrote " << cfg_.out << "/final.safetensors\n";
  const bool sampling = run_.sample && text() && cfg_.generate > 0;
  if (sampling && (report || strategy_->sharded())) summary.sample = sample(cfg_.generate);
  std::vector<nlohmann::ordered_json> records;
  std::vector<std::string> lines;
  strategy_->finish_run(records, lines);
  if (metrics)
    for (const auto& r : records) metrics->record(r);
  if (report)
    for (const auto& l : lines) out() << l << "\n";
  memory_.peak_resident = peak_resident_bytes();
  memory_.shared = shared_resident_bytes();
  const std::vector<MemoryReport> memory = strategy_->gather_memory(memory_);
  if (report) out() << memory_table(memory);
  if (metrics) {
    metrics->memory(memory);
    metrics->flush();
    out() << "wrote " << write_run_report(cfg_.out) << "\n";
  }
  if (report && sampling) {
    const auto* corpus = dynamic_cast<const data::TextDataset*>(data_.get());
    out() << "--- " << cfg_.generate << " " << (corpus ? corpus->unit() : "tokens") << " sampled at temperature " << cfg_.temperature << " ---\n"
          << summary.sample << "\n---\n";
  }
  out() << std::flush;
  return summary;
}

}  // namespace artel::train
