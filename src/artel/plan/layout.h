// Layout: how a training step is split over the workers — dp × tp × pp,
// micro-batches and their schedule, the ZeRO stage, recomputation, sequence
// parallelism and gradient compression — and Workload: what is trained
// apart from the split (global batch, precision, how optimizer state is
// kept). validate_layout() says why a layout cannot run; it is the one
// definition of "valid" the search enumerates.
//
// Ranks are placed as artel's parallel::Topology places them: tp fastest,
// then pp, then dp, so a tensor-parallel group is adjacent ranks (one host
// when it fits) and a data-parallel group strides over tp × pp.
//
//   Layout l{.dp = 4, .tp = 8, .pp = 12, .micro_batches = 384, .schedule = Schedule::interleaved, .chunks = 2};
//   validate_layout(model, l, workload, cluster.workers());   // throws Error with the reason
#pragma once

#include <cstdint>
#include <string>

#include "artel/parallel/bucket_plan.h"
#include "artel/plan/cluster.h"
#include "artel/plan/model_description.h"

namespace artel::plan {

// gpipe: all forwards, then all backwards; 1f1b: PipeDream-Flush;
// interleaved: Megatron's interleaved 1F1B, `chunks` model chunks per stage.
enum class Schedule { gpipe, one_f_one_b, interleaved };
Schedule parse_schedule(const std::string& name);  // "gpipe" | "1f1b" | "interleaved"
const char* schedule_name(Schedule s);

// none: backward uses what forward kept; selective: the attention core
// (softmax, its dropout, Q·Kᵀ, P·V) is recomputed (Korthikanti et al. 2022);
// full: each layer keeps only its input and runs its forward again in backward.
enum class Recompute { none, selective, full };
Recompute parse_recompute(const std::string& name);  // "none" | "selective" | "full"
const char* recompute_name(Recompute r);

// Whose autograd the activation bytes are counted for (kept_activations.h):
// Megatron-LM's (Korthikanti et al. 2022) or artel's own.
enum class Activations { megatron, artel };
Activations parse_activations(const std::string& name);  // "megatron" | "artel"
const char* activations_name(Activations a);

// How data parallelism's collectives cross hosts when a host holds several
// of a group's workers (plan/collective_cost.h): NCCL's rings side by side,
// one through each worker's network share (Megatron-LM's runs), or artel's
// hierarchical steps (inside the host, across hosts on 1/k of the bytes a
// worker, inside again).
enum class CrossHost { rings, hierarchical };

// What data parallelism sends for a gradient, as `artel train
// --grad-compression` names it: the gradient's own type (none), bf16 (2
// bytes an element), or PowerSGD at rank r (parallel/powersgd.h: each weight
// matrix n×m as its factors P (n×r) and Q (m×r), in two all-reduces; a
// matrix where that saves less than half, and every vector, goes whole with
// the first).
struct Compression {
  enum class Kind { none, bf16, powersgd } kind = Kind::none;
  int rank = 0;  // powersgd only, >= 1
  bool operator==(const Compression&) const = default;
};
// "none" | "bf16" | "powersgd" (at `powersgd_rank`, `artel train --powersgd-rank`).
Compression parse_compression(const std::string& name, int powersgd_rank);
std::string compression_name(const Compression& c);  // "none", "bf16", "powersgd:4"

struct Layout {
  int64_t dp = 1, tp = 1, pp = 1;
  int64_t micro_batches = 1;  // per replica per step; micro-batch size = global batch / (dp · micro_batches)
  Schedule schedule = Schedule::one_f_one_b;
  int64_t chunks = 1;  // model chunks per stage: interleaved only (>= 2), else 1
  int zero = 0;        // ZeRO stage 0-3 over the dp group
  Recompute recompute = Recompute::none;
  bool sequence_parallel = false;  // Megatron's: layer norms and dropouts split along the sequence over tp
  Compression compression;
  bool operator==(const Layout&) const = default;
};
// "dp4 tp8 pp12 m384 interleaved×2 zero1 recompute=full sp grad=none"
std::string describe(const Layout& l);

// Bytes per parameter of what a worker keeps, before ZeRO sharding.
struct StateBytes {
  double weight = 4, gradient = 4, optimizer = 8;
  // artel's own training (fp32 and --precision bf16 alike): fp32 weights,
  // fp32 gradients, AdamW's m and v in fp32 (src/artel/train/memory_report.h,
  // tools/zero_bytes_per_parameter.py: 16 bytes a parameter at --zero 0).
  static StateBytes artel_adamw() { return {4, 4, 8}; }
  // artel's SGD: its momentum buffer in fp32, or no state at all.
  static StateBytes artel_sgd(bool momentum) { return {4, 4, momentum ? 4.0 : 0.0}; }
  // Mixed precision as the ZeRO paper counts it (Rajbhandari et al. 2020,
  // §3.1): bf16/fp16 weights and gradients, fp32 master weights, m and v.
  static StateBytes mixed_adamw() { return {2, 2, 12}; }
};

struct Workload {
  int64_t global_batch = 1;               // sequences (or samples) per optimizer step
  Precision precision = Precision::bf16;  // the matrix products' rate; activations 2 bytes (bf16) or 4 (fp32)
  StateBytes state = StateBytes::artel_adamw();
  // Data-parallel reductions start during the last micro-batch's backward
  // (artel's DDP buckets, PyTorch DDP) or only after it (Megatron-LM 2021).
  bool overlap_grad_reduce = true;
  // Which gradients reduce together while backward runs: DDP's buckets
  // (parallel/bucket_plan.h; artel's and PyTorch's defaults, 1 and 25 MiB).
  parallel::BucketOptions buckets;
  // artel's DDP keeps a tied embedding table of a bucket's size or more in a
  // bucket of its own, reduced once the head's backward is done, and gathers
  // its lookup's rows at the end (ZeRO 0-2, no PowerSGD; Note [Tables
  // apart]); PyTorch's DDP buckets it with the first tensors.
  bool tables_apart = false;
  // Bytes of a gradient bucket held as a copy of the gradients while it is
  // reduced (PyTorch's DDP without gradient_as_bucket_view: its 25 MiB
  // buckets, two in flight). 0 for artel: its DDP reduces the buckets that
  // hold the gradients themselves (train/data_parallel.h), which its memory
  // report counts as gradients.
  double bucket_copy_bytes = 0;
  // Under tensor parallelism each tp rank sends only its 1/tp of a stage's
  // output to the next stage, which all-gathers it over its own fast links
  // (Megatron-LM's scatter/gather, Narayanan et al. 2021 §4.1); artel's
  // pipeline executor sends the whole tensor from every tp rank.
  bool scatter_gather_sends = false;
  // Whether the GPT trains with dropout (Megatron-LM's runs, at 0.1), which
  // keeps a 1-byte mask of each dropout and the dropped copy of the attention
  // probabilities until backward; artel's GPT defaults to none (nanoGPT's
  // GPT-2 recipe too), and then keeps neither (stage_work.h).
  bool dropout = false;
  // Whose activation accounting applies: Megatron-LM's for the published
  // runs, artel's for artel's own (`artel plan` and `artel train`'s check).
  Activations activations = Activations::megatron;
  // Data parallelism across hosts: rings for the published runs, artel's
  // hierarchical collectives for its own.
  CrossHost cross_host = CrossHost::rings;
  // Threads each worker runs on (`artel train --threads`); only CPU clusters
  // (Cluster::cores_per_host) use it, through worker_speed(). 0 = what
  // `artel train --nproc` picks: the host's cores split evenly, at least 1.
  int64_t threads = 0;
};

// Throws Error naming the first rule the layout breaks for this model,
// workload and number of workers.
void validate_layout(const ModelDescription& model, const Layout& l, const Workload& w, int64_t workers);
// The micro-batch size: global batch / (dp · micro_batches), sequences.
int64_t micro_batch_size(const Layout& l, const Workload& w);

}  // namespace artel::plan
