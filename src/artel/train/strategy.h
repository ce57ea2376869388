// Strategy: the one seam between the training loop (trainer.h) and how a run
// is parallelised, as Lightning's Strategy or DeepSpeed's engine is. The loop
// is written once — batch, forward and backward, sync, clip, step, evaluate,
// checkpoint, weights — and asks the strategy for each part that depends on
// where the model and the data live. This base class is a worker alone:
// the whole model, its own batches, nothing to synchronise.
//
//   Strategy                a worker alone (Trainer's default)
//   DataParallelStrategy    the whole model on every worker, gradients averaged by DDP (data_parallel.h)
//   ModelMesh               a shard of the model over a dp × pp × tp mesh (model_mesh.h)
//
// Note [Model-parallel seams]
// The Trainer declares the model (shapes, no storage: Note [Declared
// parameters] in nn/module.h) and hands it to build(): alone or data-parallel
// that materialises the whole model from the seed or --init; a mesh applies
// the model's plan and materialises only this worker's part, as the whole
// model would hold it. From then on the optimizer updates what build()
// returned, and every step, evaluation, checkpoint and weights file goes
// through the strategy, so no worker of a mesh ever holds the whole model.
// Files keep the single-worker names, so any layout's files compare.
//
// Note [Sharded checkpoints]
// A checkpoint is not gathered: every worker lists the parts of whole
// tensors it writes (held_parts, held_part.h) — over all workers each
// element exactly once — and writes them as its own shard; the reporter
// writes a manifest last (checkpoint_store.h). On resume every worker lists
// the parts it needs under its own layout (wanted_parts) and reads only
// what overlaps them (checkpoint_reader.h), so a run resumes under any
// world size, dp × pp × tp and --zero. A strategy of its own (ZeRO-3: each
// rank a flat range of each parameter) plugs in by listing its parts.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "artel/comm/process_group.h"
#include "artel/data/dataset.h"
#include "artel/nn/model.h"
#include "artel/nn/module.h"
#include "artel/nn/safetensors.h"
#include "artel/optim/optimizer.h"
#include "artel/train/held_part.h"
#include "artel/train/evaluate.h"
#include "artel/train/memory_report.h"

namespace artel::train {

class Strategy {
 public:
  virtual ~Strategy() = default;

  // This worker's batches: those of data-parallel replica `replica()` of `replicas()`.
  virtual int64_t replica() const { return 0; }
  virtual int64_t replicas() const { return 1; }
  // The one worker of a run that prints and writes files.
  virtual bool reporter() const { return true; }
  // The model is split over the workers: evaluation, weights files and the
  // gathering of the whole model are collectives every worker joins.
  virtual bool sharded() const { return false; }
  // Every worker joins evaluate(), a collective: the model is sharded, or
  // the replicas split the validation batches between them.
  virtual bool evaluates_together() const { return sharded(); }
  // Gradients are synchronised (the metrics then split compute from sync).
  virtual bool synchronises() const { return false; }

  // Gives the declared `model` its weights on this worker — from `init`
  // (a safetensors file) when given, else drawn from `seed` — and returns what
  // the optimizer updates. `data` supplies inputs to time pieces on.
  virtual nn::NamedParameters build(nn::Model& model, const data::Dataset& data, uint64_t seed,
                                    const std::string& init);
  // The optimizer over build()'s parameters exists (a sharded step wraps it).
  // Here: the gradients get one buffer for the run (keep_gradients_in_place).
  virtual void attach(optim::Optimizer& optimizer);

  // Step k (1-based) begins: before its forward.
  virtual void begin_step(int64_t k) {}
  // One step's forward and backward over this worker's micro-batches, each
  // loss scaled by 1/K (Note [Micro-batches] in trainer.h); gradients
  // accumulate. Returns this worker's loss (0 where it computes none).
  virtual double forward_backward(std::span<const data::Batch> micro_batches);
  // After backward: waits for the gradients' synchronisation -> exposed seconds.
  virtual double sync_gradients() { return 0; }
  // The step's loss as reported: the mean over replicas of the local losses.
  virtual double reported_loss(double local) { return local; }
  // torch.nn.utils.clip_grad_norm_ over the whole model's gradients. Collective.
  // Strategies measure here and keep the coefficient (clip_scale_);
  // optimizer_step hands it to the optimizer, which applies it as it reads
  // each gradient (no pass of its own over 124M gradients, and no private
  // copy of a gradient the graph shares).
  virtual void clip_grad_norm(float max_norm);
  // The optimizer step -> seconds waited for peers in it.
  virtual double optimizer_step(optim::Optimizer& optimizer);

  virtual EvalResult evaluate(const data::Dataset& data, const EvalOptions& opts);
  // Every worker reaches this before a checkpoint is written.
  virtual void barrier() {}
  // The group of every worker of the run (null: a worker alone).
  virtual comm::ProcessGroup* world_group() { return nullptr; }
  // Whether every worker passes true. Collective.
  bool all_agree(bool mine);

  // ---- checkpoints (Note [Sharded checkpoints] below)
  // The parts of whole tensors this worker writes: over all workers, every
  // element of every whole tensor exactly once. Data aliases live state.
  virtual std::vector<HeldPart> held_parts(optim::Optimizer& optimizer) {
    return parts_to_write(holdings(optimizer), optimizer);
  }
  // What this worker reads back under its own layout: its weights, in
  // place, and its optimizer state, into fresh tensors that
  // load_optimizer_parts hands to the optimizer.
  virtual std::vector<HeldPart> wanted_parts(optim::Optimizer& optimizer) {
    return parts_to_read(holdings(optimizer), optimizer);
  }
  // The model's buffers (running statistics, counters: state that is not
  // trained) this worker writes to a checkpoint (`writing`), or reads back
  // in place, by whole-model name. Here every worker runs the whole model:
  // the reporter writes them and every worker reads them.
  virtual std::vector<std::pair<std::string, Tensor>> checkpoint_buffers(const nn::Model& model, bool writing) const {
    if (writing && !reporter()) return {};
    return model.named_buffers();
  }
  // This worker's shard of a checkpoint (-1: it writes none) and how many
  // shards a checkpoint has: by default one per worker of world_group().
  virtual int shard();
  virtual int shards();
  // Shards other processes write at this worker's request (a parameter
  // server's), under the run's checkpoint folder `store_dir`, after this
  // worker's own; and read back from checkpoint directory `dir`.
  virtual void write_other_shards(int64_t /*step*/, const std::string& /*store_dir*/) {}
  virtual void read_other_shards(int64_t /*step*/, const std::string& /*dir*/) {}
  // After a checkpoint's `wanted` parts were read in (found[i] for
  // wanted[i]): state the strategy keeps beside the model and optimizer
  // (PowerSGD's) takes effect. Returns whether the checkpoint held all of this
  // worker's state of the gradient compressor, which an exact resume needs
  // (Note [PowerSGD in checkpoints]); where not, the compressor starts afresh.
  virtual bool parts_restored(const std::vector<HeldPart>& /*wanted*/, const std::vector<bool>& /*found*/) {
    return true;
  }
  // This worker's pipeline stage, of how many; and whether it is the one
  // worker of its stage that writes the stage's dropout generator.
  virtual int stage() const { return 0; }
  virtual int stages() const { return 1; }
  virtual bool writes_dropout() const { return reporter(); }
  // The layout, for checkpoints and messages: {"world", "dp", "pp", "tp"}.
  virtual nlohmann::json layout();
  // Writes the whole model's weights under single-worker names on the
  // reporter (collective when sharded(); a mesh streams a batch of tensors
  // at a time).
  virtual void write_weights(const std::string& path, const std::map<std::string, std::string>& metadata);
  // ids (1, T) -> the logits of position T - 1 over the whole vocabulary,
  // on every worker (models/generate.h); collective when sharded(), where it
  // runs through the shards. The caller sets eval mode and no graph.
  virtual std::vector<float> next_token_logits(const Tensor& ids);
  // Lines for the start of the run ("" = none): the layout, gradient
  // synchronisation (with the flags that tune it).
  virtual std::string describe() const { return ""; }
  virtual std::string describe_sync() const { return ""; }
  // Fields of the strategy's own for the step's line of metrics.jsonl
  // (a parameter server's staleness and bytes moved); an object.
  virtual nlohmann::ordered_json step_record() const { return nlohmann::ordered_json::object(); }
  // At the end of the run, after the last step and evaluation, before the
  // weights are written: lines for metrics.jsonl and for the terminal.
  virtual void finish_run(std::vector<nlohmann::ordered_json>& records, std::vector<std::string>& lines) {}
  // Bytes of parameters this worker holds, at most so far (MemoryReport::parameters),
  // and of them the most held gathered beyond its own (MemoryReport::gathered).
  virtual int64_t parameter_bytes() const;
  virtual int64_t gathered_bytes() const { return 0; }
  // Bytes of gradients this worker holds after sync_gradients() (MemoryReport::gradients).
  virtual int64_t gradient_bytes() const;
  // Registered memory this worker's process groups handed out (MemoryReport::communication).
  virtual int64_t communication_bytes() const { return 0; }
  // Every worker's report, in rank order, on the reporter (collective).
  virtual std::vector<MemoryReport> gather_memory(const MemoryReport& mine) { return {mine}; }

 protected:
  // Around forward_backward's micro-batches: a guard under which backward
  // only accumulates locally (the first K−1), and the local loss known
  // before the last backward (a reduction may start and overlap it).
  virtual std::shared_ptr<void> accumulate_locally() { return nullptr; }
  virtual void loss_ready(double local) {}
  // The optimizer step is sharded (--zero 1): each worker keeps state for
  // the elements optimizer.owned() names, and those partition each parameter.
  virtual bool optimizer_sharded() const { return false; }
  // How this worker holds each parameter and what of it it writes. Here the
  // whole model on every replica: replica 0 writes it, or with a sharded
  // step each replica its owned elements (weights and state alike).
  virtual std::vector<ParameterHolding> holdings(const optim::Optimizer& optimizer) const;
  // gather_memory over `world`.
  static std::vector<MemoryReport> gather_over(comm::ProcessGroup& world, const MemoryReport& mine);
  // Parameter `name` of the --init file, or of an alias of it (a tied head
  // saved as lm_head.weight); an Error when the file has neither.
  static Tensor read_init(const nn::SafetensorsReader& file, const std::map<std::string, std::string>& aliases,
                          const std::string& name);
  // Throws naming the first tensors of the --init file that are none of the
  // model's (parameters, aliases, buffers): a worker reading only its own
  // parts took a file of another model's shape, and dropped what it held more,
  // where the whole model's load refuses it.
  static void check_init_holds_only(const nn::SafetensorsReader& file, const nn::Model& model);

  // Note [Gradients in place]: one buffer, allocated before the first step, that
  // backward writes each of `params`' gradients into, for a strategy whose
  // gradients have no buckets to live in (one replica).
  void keep_gradients_in_place(const nn::NamedParameters& params);

  nn::Model* model_ = nullptr;  // set by build()
  int64_t data_classes_ = 0;       // build()'s data's classes: a step's logits must have as many
  nn::NamedParameters params_;      // what build() returned
  float clip_scale_ = 1.0f;         // clip_grad_norm's coefficient for the next optimizer_step
  Tensor gradients_;                // keep_gradients_in_place's buffer
};

}  // namespace artel::train
