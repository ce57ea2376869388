// TrainConfig: everything one training run needs, as one typed struct (after
// DeepSpeed's zero/config.py). Each field has a type, a default, a range check
// (validate()) and a comment; the per-model defaults are the benchmark
// recipes (W2 for gpt: nanoGPT's baby character model; W1 for mlp: the MNIST
// MLP; README.md lists them). The same keys come from a JSON file or from the
// command line (flags use hyphens, JSON keys underscores or hyphens; a later
// source overrides an earlier one):
//
//   ConfigSources src;
//   src.json = nlohmann::json::parse(file);      // {"model": "mlp", "lr": 0.1}
//   src.overrides = {{"steps", "100"}};          // from --steps 100
//   TrainConfig cfg = resolve_config(src);       // defaults(model) <- json <- overrides, validated
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "artel/parallel/bucket_plan.h"
#include "artel/parallel/distributed_data_parallel.h"

namespace artel::train {

struct TrainConfig {
  // ---- what to train
  std::string model = "gpt";        // gpt | mlp | cnn, or the name of a user's model (Trainer's second constructor)
  std::string data;                 // text file (gpt) or MNIST directory (mlp, cnn); "" = the bundled one
  std::string val_data;             // token files: the validation file; "" = the last 10% of `data`
  int64_t vocab_size = 0;           // token files: ids must be below it; 0 = GPT-2's 50,257
  std::string init;                 // safetensors file to start from; "" = fresh init from `seed`
  std::string out = "runs/gpt";     // directory for metrics.jsonl, init/final.safetensors

  // ---- how long, in what order
  int64_t steps = 2000;             // optimizer steps, >= 1 (gpt: W2's 2000, about a minute on 2 quiet cores)
  int64_t epochs = 0;               // > 0: steps = epochs · steps per epoch (excludes an explicit `steps`)
  int64_t batch_size = 12;          // rows per step and worker (per micro-step with accum > 1), >= 1
  int64_t accum = 1;                // micro-steps per optimizer step (gradient accumulation), >= 1
  std::string data_order = "shuffle";  // shuffle | sequential (data/sampler.h, Note [Batch order])
  int64_t seed = 1337;              // >= 0: weights, batch order and dropout all derive from it
  int64_t threads = 0;              // >= 0; 0 = every core this process may use
  std::string gemm = "onednn";      // onednn | openblas: the library behind every matrix product (kernels/gemm.h)
  // fp32 | bf16: the inputs of every matrix product (bf16: mixed precision on a CPU with native bf16;
  // weights, gradients, optimizer state, accumulation and checkpoints stay fp32)
  std::string precision = "fp32";
  // Data parallelism's gradient reduction (PyTorch's DDP communication hooks):
  // none | bf16 (half the bytes; summed in fp32 at each hop) | powersgd
  // (rank-r approximation with error feedback, parallel/powersgd.h).
  // grad_reduce_dtype bf16 is the same as grad_compression bf16.
  std::string grad_compression = "none";
  std::string grad_reduce_dtype = "fp32";  // fp32 | bf16
  int64_t powersgd_rank = 4;               // >= 1: columns of PowerSGD's P and Q
  int64_t powersgd_start_step = 10;        // >= 0: steps reduced uncompressed before PowerSGD starts
  // The gradient all-reduce's algorithm (docs/COLLECTIVES.md): auto, or one
  // forced, e.g. native (MPI's own) against hierarchical across hosts.
  std::string grad_all_reduce = "auto";

  // ---- optimizer (PyTorch semantics)
  std::string optimizer = "adamw";  // adamw | sgd
  double lr = 1e-3;                 // peak learning rate, > 0
  double momentum = 0.0;            // sgd, in [0, 1)
  bool nesterov = false;            // sgd
  double beta1 = 0.9;               // adamw, in [0, 1)
  double beta2 = 0.99;              // adamw, in [0, 1)
  double eps = 1e-8;                // adamw, > 0
  double weight_decay = 0.1;        // >= 0; adamw applies it to parameters with >= 2 dims only
  double grad_clip = 0.0;           // global gradient-norm clip, >= 0; 0 = off
  std::string lr_schedule = "constant";  // constant | cosine (linear warmup, then cosine to min_lr)
  int64_t warmup_steps = 0;         // >= 0, linear warmup from 0 (both schedules)
  double min_lr = -1.0;             // cosine floor, <= lr; negative = lr/10 (nanoGPT's convention)

  // ---- evaluation and output
  int64_t eval_every = 500;         // >= 0; evaluate every N steps and after the last; 0 = only after the last
  int64_t eval_batches = 0;         // >= 0; validation batches per evaluation; 0 = the whole split
  int64_t log_every = 0;            // >= 0; plain progress line every N steps (no terminal); 0 = about 20 lines per run
  int64_t generate = 300;           // gpt: characters sampled after training and printed, >= 0
  double temperature = 0.8;         // sampling temperature, > 0 (nanoGPT sample.py uses 0.8)

  // ---- data parallelism (parallel/bucket_plan.h): gradients travel in buckets,
  // each all-reduced as soon as its gradients are final during backward
  double bucket_mb = 25.0;          // MiB per bucket, > 0 (PyTorch's bucket_cap_mb)
  double first_bucket_mb = 1.0;     // MiB of the first bucket, > 0: small, so communication starts early
  // DeepSpeed's ZeRO stages over the data-parallel ranks (with --tp / --pp: the
  // mesh's). 0: every worker runs the whole step (PyTorch's DDP); 1: each
  // updates 1/N of the weights, which are all-gathered (Note [Sharded optimizer
  // step]); 2: and keeps only 1/N of the averaged gradients (Note [Sharded
  // gradients]); 3: and of the weights, gathered unit by unit when used
  // (FSDP, parallel/fully_sharded.h). Same weights, up to float rounding.
  // 2 and 3 refuse --pp (a pipeline accumulates whole gradients over its
  // micro-batches), as DeepSpeed does.
  int64_t zero = 1;
  bool reshard_after_forward = true;  // --zero 3: gather a unit for forward and again for backward (FSDP's default)

  // ---- checkpoints (OUT/checkpoints/ckpt-<step>/: a shard per worker and a manifest, checkpoint_store.h)
  int64_t checkpoint_every = 0;     // >= 0; a checkpoint every N steps and after the last; 0 = none
  int64_t keep_checkpoints = 3;     // >= 0; the newest K are kept; 0 = keep all

  // ---- model parallelism (any model whose plan allows it; mesh_worker.h). Data parallelism takes the
  // workers left: dp = nproc / (tp · pp).
  int64_t tp = 1;                   // tensor-parallel degree, >= 1, divides n_head and the vocabulary
  bool sequence_parallel = false;   // with tp > 1: the layers' stream split by tokens (parallel/sequence_parallel.h)
  int64_t pp = 1;                   // pipeline stages, in [1, n_layer]
  int64_t micro_batches = 1;        // micro-batches per step of one replica, >= 1, divides batch_size
  std::string schedule = "1f1b";    // gpipe | 1f1b | interleaved
  int64_t chunks = 1;               // interleaved: model chunks a stage (Megatron's virtual stages), >= 2; else 1
  std::string stage_layers;         // "params" (or ""), "cost", or blocks per (virtual) stage, e.g. "1,3"
  std::string trace;                // write a Chrome trace (and for pipelines an SVG) to this file; "" = none

  // ---- parameter server (parameter_server.h): with ps_servers > 0 the job's
  // last ps_servers ranks keep the parameters and the others train against them
  int64_t ps_servers = 0;           // >= 0; 0 = no parameter server
  std::string staleness = "0";      // 0 (BSP) | k > 0 (SSP: at most k clocks ahead of the slowest) | inf (ASP)
  bool ps_sparse = true;            // a model's sparse tables (nn::Embedding::sparse) move by the rows a step reads

  // ---- memory
  std::string recompute = "none";   // none | selective | full (nn/model.h: what backward recomputes instead of keeping)

  // ---- GPT shape (ignored by mlp, cnn)
  std::string preset;               // "" | gpt2 | gpt2-medium: nanoGPT's shape and recipe (apply_preset)
  int64_t n_layer = 4;              // >= 1
  int64_t n_head = 4;               // >= 1, divides n_embd
  int64_t n_embd = 128;             // >= 1
  int64_t block_size = 64;          // context length T, >= 1
  double dropout = 0.0;             // in [0, 1)
  std::string gelu = "exact";       // exact | tanh (GPT-2's gelu_new: Hugging Face's weights compute as there)
  int64_t vocab_multiple = 1;       // >= 1: the model's vocabulary is the data's rounded up to a multiple (gpt2: 64)

  // The keys the user set (a --config file or flags; resolve_config records
  // them), as opposed to defaults: resuming keeps the checkpoint's global
  // batch by choosing --accum unless "accum" is among them (trainer.h, Note
  // [Resuming]). Not a setting itself.
  std::vector<std::string> given;
  bool was_given(const std::string& key) const;

  // Throws artel::Error naming the first field out of range.
  void validate() const;
  // Tensor or pipeline parallelism, or micro-batches: the run goes through
  // the model-parallel mesh.
  bool model_parallel() const { return tp > 1 || pp > 1 || micro_batches > 1; }
  int64_t virtual_stages() const { return pp * chunks; }  // the pipeline's length in model chunks
  // bucket_mb and first_bucket_mb in bytes, for DdpOptions.
  parallel::BucketOptions bucket_options() const;
  // The data-parallel options these settings give: buckets and the gradients'
  // compression (grad_compression, or grad_reduce_dtype's bf16).
  parallel::DdpOptions ddp_options() const;
  // stage_layers as numbers ({} for params or cost); throws on malformed text.
  std::vector<int64_t> stage_layer_counts() const;
  // Every field by its key (for metrics / logs: the run records its own config).
  nlohmann::json to_json() const;
};

// The recipe defaults of one model ("gpt": W2, "mlp": W1, "cnn": W1 with lr
// 0.02). Throws on an unknown model.
TrainConfig default_config(const std::string& model);

// nanoGPT's GPT-2 shapes and recipe over `c`'s defaults: "gpt2" (124M: 12
// layers, 12 heads, 768 wide, block 1024, vocabulary padded to a multiple of
// 64: 50,304 for GPT-2's 50,257) and "gpt2-medium" (350M: 24 layers, 16
// heads, 1024 wide); AdamW β = (0.9, 0.95), weight decay 0.1, clipping at
// 1.0, 2000 warmup steps, then cosine decay to lr/10 over 600,000 steps
// (lr 6e-4 for gpt2, 3e-4 for gpt2-medium), micro-batch 12, evaluation
// every 2000 steps over 200 batches. "" changes nothing; throws on another name
// or a model other than gpt.
void apply_preset(TrainConfig& c, const std::string& preset);

// Where the values of a run come from, lowest priority first.
struct ConfigSources {
  nlohmann::json json = nlohmann::json::object();   // a --config file's contents (an object)
  std::map<std::string, std::string> overrides;     // key -> text, from flags
  // `json` is a run's own config.json, read to act on that run (artel
  // generate): settings it holds that the run did not read were taken when
  // it ran, so they are not refused (refuse_settings_without_effect) now.
  bool recorded = false;
};

// defaults(model) <- preset <- json <- overrides, then validate(). The model
// and the preset are taken from the overrides, else the json, else "gpt" and none. Unknown keys, values of the
// wrong type, unparsable text and `steps` together with `epochs` are errors.
TrainConfig resolve_config(const ConfigSources& src);

// Reads and parses a JSON config file (must hold one object).
nlohmann::json read_config_file(const std::string& path);

// One settable field, for building command lines and docs from the struct.
struct ConfigKey {
  std::string key;   // snake_case; the flag is "--" + key with '_' -> '-'
  std::string help;  // one line
  std::string type;  // INT | FLOAT | TEXT | BOOL
};
const std::vector<ConfigKey>& config_keys();
// A key's command-line flag: "grad_clip" -> "--grad-clip".
std::string flag_of(const std::string& key);

// What would make a worker of this run hold less, for its out-of-memory
// errors (core/memory_limit.h): kOutOfMemoryHint's advice without what the
// run already does (--zero 3, --recompute full) or cannot (--zero 3 with
// model parallelism or a parameter server).
std::string memory_hint_for(const TrainConfig& cfg);

}  // namespace artel::train
