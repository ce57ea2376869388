// Trainer: the training loop of one worker. It opens the data, builds the
// model (from the config's seed, or from --init weights), the optimizer and
// the LR schedule, and runs steps 1 … N:
//
//   batch k  ->  forward -> loss  ->  backward  ->  [sync gradients]  ->  clip  ->  update
//
// The loss of step k is the loss of step k's forward pass. Each step writes a
// line to DIR/metrics.jsonl and moves the progress display; an evaluation runs
// every eval_every steps and after the last; DIR/init.safetensors holds the
// weights before step 1 and DIR/final.safetensors those after step N. A loss
// that is NaN or infinite stops the run with an error naming the step, before
// the bad gradients reach the weights.
//
// Note [Strategies]
// How the run is parallelised is one object, the Strategy (strategy.h), not
// edits to the loop: the loop below calls it for the parts that depend on
// where the model and the data live (build the weights, forward/backward,
// sync, reported loss, clip, optimizer step, evaluate, checkpoint, weights).
// A worker alone uses the base Strategy; DataParallelWorker and MeshWorker
// pass theirs. Only the strategy's reporter writes files and prints. Batches
// are a pure function of the step (data/dataset.h), so a worker only needs
// its replica number in the sampler config.

// Note [Micro-batches]
// With accum = K, a step runs K forward/backward passes of B rows each, the
// first K−1 under `no_sync` (gradients accumulate locally), each loss scaled
// by 1/K, so the update is that of one pass over K·B rows. Micro-step m of
// worker r reads the rows of virtual rank r·K + m in a world of W·K ranks:
// worker r's K micro-batches are exactly the K·B rows that worker r would read
// with --batch-size K·B. So `--accum K --batch-size B` trains on the same
// samples as `--batch-size K·B`, for any W (equal up to float rounding), and
// the global batch is W·B·K.
//
// Note [Resuming]
// With checkpoint_every = N, after every N-th step and the last one all
// workers meet at `barrier` and each writes its own parts of the model and
// optimizer state as a shard of OUT/checkpoints/ckpt-<step>/, then the
// reporter writes its manifest (Note [Sharded checkpoints] in strategy.h,
// checkpoint_store.h). With RunOptions::resume, every worker reads the
// newest complete checkpoint — under its own layout, whatever world size,
// dp × pp × tp or --zero wrote it — before step 1 and continues from the
// step after it. A torn checkpoint (no manifest, a shard missing or
// corrupt) is skipped, by all workers together, for the one before. When
// complete checkpoints exist but none can be restored the run is refused:
// a restore that failed has written some weights, and a fresh start would
// train on them and overwrite the checkpoints. Another model or optimizer
// than the checkpoint's (its manifest records the parameters' names and
// shapes, and the optimizer's state) is refused before anything is read.
//
// The global batch G the checkpoint was trained with is kept: without
// --accum, accum is chosen so that replicas × batch × accum = G
// (resume_batch.h), and batches being functions of (seed, step) and the
// generator states, the continued run computes what an uninterrupted one
// would, up to float rounding when the layout changed (exactly when not).
// With --accum the user picks a new G; the data then goes on from the
// samples consumed (the manifest's consumed_samples, Megatron's), by the
// sampler's row offset (data/sampler.h). Dropout generators are restored
// when the pipeline has as many stages as the checkpoint's; otherwise they
// start afresh (a note says so when dropout > 0). metrics.jsonl keeps the
// lines up to the checkpoint's step; init.safetensors is left as the first
// attempt wrote it.
//
//   Trainer t(cfg, {.out = &std::cout, .terminal = isatty(1)});
//   RunSummary s = t.run();
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "artel/data/data_loader.h"
#include "artel/data/dataset.h"
#include "artel/models/model.h"
#include "artel/optim/lr_schedule.h"
#include "artel/optim/optimizer.h"
#include "artel/train/checkpoint_reader.h"
#include "artel/train/checkpoint_store.h"
#include "artel/train/evaluate.h"
#include "artel/train/run_checkpoint.h"
#include "artel/train/strategy.h"
#include "artel/train/train_config.h"

namespace artel::train {

class MetricsWriter;
class Progress;

struct RunOptions {
  std::ostream* out = nullptr;  // progress and messages; null = std::cout
  bool terminal = false;        // draw a progress bar in place (out is a terminal)
  bool write_files = true;      // metrics.jsonl, config.json, init/final.safetensors under cfg.out (false: no cfg.checkpoint_every)
  bool evaluate = true;         // evaluations (every eval_every steps and at the end)
  bool sample = true;           // gpt: print cfg.generate sampled characters at the end
  bool set_threads = true;      // apply cfg.threads to the process (artel::set_num_threads)
  bool resume = false;          // continue from the newest checkpoint under cfg.out (Note [Resuming]); none: start fresh
  std::function<void(int64_t)> after_step;  // after step k and its checkpoint (fault-injection tests)
  // After step k's forward and backward, before its gradients leave the
  // worker, with the seconds they took: where a slower machine's extra time
  // goes (straggler experiments).
  std::function<void(int64_t step, double seconds)> after_compute;
};

struct StepResult {
  double loss = 0;      // reported loss of this step's forward pass (mean over workers)
  float lr = 0;         // the learning rate this step applied
  double comp_ms = 0;   // forward + backward + clip + update
  double sync_ms = 0;   // exposed gradient synchronisation
};

struct RunSummary {
  int64_t steps = 0;                      // steps done
  std::vector<double> losses;             // per step
  std::vector<double> step_ms;            // per step: fetch + compute + sync
  std::optional<EvalResult> final_eval;   // after the last step
  std::string sample;                     // gpt: the generated text ("" if none)
};

class Trainer {
 public:
  // Opens the data and builds model and optimizer; throws artel::Error on bad
  // data, a model that does not fit the data, or unusable --init weights.
  // `strategy` (owned by the caller, outliving the Trainer) parallelises the
  // run; null: a worker alone.
  explicit Trainer(TrainConfig cfg, RunOptions run = {}, Strategy* strategy = nullptr);
  // A model and a dataset of the user's own (cfg.model names the model in
  // messages and files; cfg's data and GPT fields are not read). The model is
  // declared (its layers declare their parameters, nn/module.h): the
  // strategy draws its weights from cfg.seed or reads cfg.init. Its forward
  // maps a batch's x to logits scored by cross-entropy against y.
  Trainer(TrainConfig cfg, std::unique_ptr<nn::Model> model, std::unique_ptr<data::Dataset> data,
          RunOptions run = {}, Strategy* strategy = nullptr);
  ~Trainer();

  RunSummary run();

  // One step with the batch of step k (1-based): the pieces of run(), public
  // so tools (benchmarks, data parallelism tests) can drive them.
  StepResult step(int64_t k, const data::Batch& batch);
  // With accumulation: one micro-batch per micro-step (Note [Micro-batches]).
  StepResult step(int64_t k, std::span<const data::Batch> micro_batches);
  EvalResult evaluate();
  // `chars` characters sampled from the gpt (decoded); throws for other
  // models. Collective when the model is sharded (it is gathered whole).
  std::string sample(int64_t chars);

  const TrainConfig& config() const { return cfg_; }
  int64_t total_steps() const { return total_steps_; }
  nn::Model& model() { return *model_; }
  const data::Dataset& dataset() const { return *data_; }
  optim::Optimizer& optimizer() { return *optimizer_; }
  // Rows (mlp, cnn) or tokens (gpt) one step consumes on this worker (all micro-steps).
  int64_t items_per_step() const;
  // Rows of one optimizer step over all workers: W·B·K.
  int64_t global_batch() const { return strategy_->replicas() * cfg_.batch_size * cfg_.accum; }

 private:
  void start();  // after the model and data: the weights, optimizer, sampler, schedule
  bool text() const;  // token blocks (items are tokens), not rows
  Compatibility compatibility() const;
  // out dir, config.json, init.safetensors (fresh runs), metrics.jsonl (kept up to `first_step` - 1)
  std::unique_ptr<MetricsWriter> start_files(int64_t first_step) const;
  void train_steps(int64_t first_step, Progress& progress, MetricsWriter* metrics, RunSummary& summary);
  void plan_data();       // the sampler (from cfg_.accum, row_offset_), the step count and the LR schedule
  int64_t resume_step();  // loads the newest checkpoint; the steps it had done (0: none)
  std::string first_problem(const std::string& mine);  // the first worker's, of a checkpoint all skip
  int64_t continue_from(const ShardedCheckpoint& ck, const RestoreOutcome& restored);  // -> its step
  nlohmann::json layout_record();  // the layout and batch settings, for a manifest
  void maybe_checkpoint(int64_t k, MetricsWriter* metrics);
  void make_out_dir() const;
  void announce() const;
  void write_config_file() const;
  void save(const std::string& name, int64_t step) const;
  bool due_for_eval(int64_t k) const;
  std::ostream& out() const;

  TrainConfig cfg_;
  RunOptions run_;
  std::unique_ptr<Strategy> alone_;  // the strategy when none was given
  Strategy* strategy_;
  std::unique_ptr<data::Dataset> data_;
  std::unique_ptr<nn::Model> model_;       // declared; its weights where the strategy put them
  nn::NamedParameters trained_;  // what the strategy built and the optimizer updates
  MemoryReport memory_;          // this worker's peaks so far
  std::unique_ptr<optim::Optimizer> optimizer_;
  optim::LrSchedule schedule_;
  data::SamplerConfig sampler_cfg_;   // micro-step 0's: world W·K, rank r·K (Note [Micro-batches])
  int64_t row_offset_ = 0;            // the sampler's (Note [Resuming]): 0 unless the global batch changed
  std::unique_ptr<CheckpointStore> store_;
  int64_t total_steps_ = 0;
};

}  // namespace artel::train
