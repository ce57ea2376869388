// DistributedDataParallel: synchronous data-parallel SGD.
//
// Every worker holds the whole model and computes gradients on its own share
// of the global batch; DDP averages them across workers so every replica takes
// the same optimizer step — the update of one worker with the whole batch.
// Parameters are broadcast from rank 0 at construction. Gradients are grouped
// into buckets (bucket_plan.h) kept in the backend's registered memory; as
// soon as every gradient of a bucket is final during backward (autograd's
// grad-ready hooks), the bucket's reduction starts asynchronously, so
// communication overlaps the rest of backward. Each parameter's slice of its
// bucket is its gradient destination (Note [Gradient destinations] in
// autograd/variable.h): ops that can write a gradient in place (Linear's
// weight and bias) put it straight into the bucket; others are copied in.
//
// Three ways to take the step (Note [Sharded optimizer step]):
// - replicated (PyTorch's DDP): each bucket is all-reduced, and every rank
//   runs the whole optimizer step;
// - sharded (DdpOptions::shard_optimizer, DeepSpeed's ZeRO stage 1): each
//   bucket is reduce-scattered, every rank updates only its block of the
//   bucket, and the new weights are all-gathered. Same bytes moved, 1/N of
//   the optimizer's work per rank, and bit-identical weights;
// - sharded gradients too (DdpOptions::shard_gradients, ZeRO stage 2): as
//   stage 1, but a rank keeps only its block of the averaged gradients
//   (Note [Sharded gradients]): 1/N of the gradient memory.
//
//   DistributedDataParallel ddp(model.named_parameters(), *pg, {});
//   ddp.shard(optimizer);       // once: which elements this rank updates
//   for (...) {
//     model.zero_grad();
//     loss.backward();          // reductions start during this
//     ddp.finish();             // exposed sync time is what this waits
//     ddp.step(optimizer);      // optimizer.step(), then the weights all-gathered when sharded
//   }
//   { auto guard = ddp.no_sync(); micro_loss.backward(); }   // accumulate locally
//
// The constructor refuses what it cannot average, naming the parameter (one
// not materialised, not float32, frozen, or listed twice), and compares the
// ranks' lists of names and shapes (a collective): ranks that wrap different
// models are named. step() refuses to run before finish() has averaged the
// backward's gradients; finish() refuses to run twice or inside no_sync().
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "artel/autograd/variable.h"
#include "artel/comm/process_group.h"
#include "artel/optim/clip.h"
#include "artel/optim/optimizer.h"
#include "artel/parallel/bucket_plan.h"
#include "artel/parallel/powersgd.h"

namespace artel::parallel {

struct DdpOptions {
  BucketOptions buckets;
  // false: a parameter that got no gradient in a step is an error naming it.
  // true: it counts as a zero gradient (PyTorch's find_unused_parameters).
  bool allow_unused_parameters = false;
  // Reduce-scatter the gradients, update this rank's block, all-gather the
  // weights (ZeRO stage 1) instead of all-reducing and updating everything.
  bool shard_optimizer = false;
  // With shard_optimizer: keep only this rank's block of the averaged
  // gradients (ZeRO stage 2). Every micro-step's backward is then reduced,
  // under no_sync() too, and the blocks accumulate.
  bool shard_gradients = false;
  // With shard_optimizer: parameters whose step stays replicated, in a bucket
  // of their own that is all-reduced and updated whole on every rank — a
  // weight tied across pipeline stages, whose averaged gradient is summed
  // with the other stage's copy after finish() and must be whole for that.
  std::function<bool(const std::string& name)> replicate;
  // The gradients' type on the wire: f32, or bf16 (`--grad-reduce-dtype bf16`,
  // half the bytes): each bucket is rounded to bf16 before its reduction,
  // every hop sums in f32 and rounds (comm/reduce.h), and the average is
  // widened back into the f32 bucket that the optimizer reads.
  DType wire = DType::f32;
  // PowerSGD (`--grad-compression powersgd`, powersgd.h): every bucket's
  // gradients of two or more dimensions averaged at a low rank, with error
  // feedback, after its first start_step steps. Not with shard_gradients
  // (no whole gradient is kept to compress) nor a bf16 wire.
  std::optional<PowerSgdOptions> powersgd;
  // The gradients' all-reduces (PowerSGD's too): "auto" or an algorithm of
  // docs/COLLECTIVES.md, e.g. "native" for MPI's own against "hierarchical".
  std::string all_reduce_algorithm = "auto";
  // Embedding tables, by name (Note [Tables apart]): each of at least
  // buckets.bucket_bytes in a bucket of its own, whose lookups' rows are kept
  // apart from its dense gradient. Not with PowerSGD, which keeps tables in
  // the plain buckets.
  std::function<bool(const std::string& name)> tables;
  // Sparse tables, by name (nn::Embedding::sparse, PyTorch's
  // nn.Embedding(sparse=True)): only looked up, so a step's gradient is the
  // rows its lookups read. Each, whatever its size, is a bucket of its own
  // that no collective reduces: every rank's rows are gathered and added at
  // finish() (Note [Sparse tables]). A dense gradient for one is refused.
  // PowerSGD leaves them so: their rows are exact and few.
  std::function<bool(const std::string& name)> sparse_tables;
};

class DistributedDataParallel {
 public:
  using NamedParameters = std::vector<std::pair<std::string, autograd::Variable>>;
  DistributedDataParallel(NamedParameters params, comm::ProcessGroup& group, const DdpOptions& opts);
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // Waits for every bucket's reduction and installs the averaged gradients
  // (sharded: only this rank's block of them is the average; outside it a
  // gradient holds this rank's own). Returns the time it spent waiting: the
  // exposed sync time.
  std::chrono::duration<double> finish();

  // Sharded: tells `opt` (over these parameters, by name) which elements this
  // rank updates. Call once, before the first step. Replicated: does nothing.
  void shard(optim::Optimizer& opt);
  // The optimizer step: opt.step(grad_scale), then (sharded) every rank's new
  // weights all-gathered. Returns the time spent waiting for the all-gather.
  std::chrono::duration<double> step(optim::Optimizer& opt, float grad_scale = 1.0f);
  // PowerSGD's state for checkpoints (empty without it): each compressed
  // gradient's Q and this rank's error feedback, by parameter, as live
  // tensors a resume reads into; and the steps counted (alike in every
  // bucket), which a resume sets back.
  struct PowerSgdState {
    std::string name;
    Tensor q, error;
  };
  std::vector<PowerSgdState> powersgd_state() const;
  int64_t powersgd_steps() const;
  void set_powersgd_steps(int64_t steps);
  // The global norm of the averaged gradients (sharded: each rank's block,
  // summed over ranks); clipping hands step() optim::clip_coefficient of it.
  // Collective.
  float grad_norm();
  // The averaged gradients this rank holds after finish(), as spans of
  // parameter `name`'s gradient: whole gradients when replicated; when
  // sharded, this rank's block of each sharded bucket, and the replicated
  // bucket's gradients on rank 0 only when `counting` (each element once
  // over the group) or on every rank when not (to scale them all).
  std::vector<optim::GradSpan> averaged_gradients(bool counting) const;
  // Whether the averaged gradients differ between ranks (a sharded step):
  // then a norm over them is summed over the group.
  bool sharded_gradients() const { return sharded(); }
  // `opt`'s whole state (state_dict() form) on every rank: sharded, each
  // rank's owned part put together with the others' (for a checkpoint; the
  // optimizer itself keeps only its part). Collective when sharded.
  optim::OptimizerState gather_optimizer_state(const optim::Optimizer& opt);
  // Bytes of the group's registered memory that hold the gradients (and, for
  // a sharded step, the weights) themselves: a memory report counts them as
  // those, not as communication buffers.
  int64_t registered_bucket_bytes() const { return registered_bucket_bytes_; }
  // Bytes of averaged gradients this rank keeps: every bucket, or (sharded
  // gradients) its blocks of them.
  int64_t gradient_bytes() const;
  // Bytes this rank handed to the gradients' collectives in the last step
  // (each bucket's buffer in its wire type; PowerSGD: its Ps, Qs and
  // uncompressed gradients): what compression shrinks. A ring all-reduce
  // sends 2(N−1)/N of it, a reduce-scatter (N−1)/N.
  int64_t reduced_bytes_last_step() const { return reduced_bytes_last_; }

  // While alive, backward passes only accumulate gradients locally (with
  // sharded gradients: are reduced and accumulate in the blocks, as a whole
  // gradient is never kept; the guard then marks a micro-step's end).
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(ddp) {
      ddp_.sync_ = false;
      ddp_.keep_rows_apart(false);  // accumulated locally, a tied table's rows go into its gradient (not at ZeRO 2)
    }
    ~NoSync() {
      ddp_.sync_ = true;
      ddp_.keep_rows_apart(true);
      if (ddp_.opts_.shard_gradients) ddp_.end_micro_step();
    }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
  };
  NoSync no_sync() { return NoSync(*this); }

  const std::vector<Bucket>& buckets() const { return plan_; }
  // The buckets in the order their reductions start: the plan's in the first
  // step, then the order rank 0 saw them become ready in it (c10d rebuilds
  // its buckets so): a bucket ready early does not wait behind one that is not.
  const std::vector<size_t>& launch_order() const { return launch_order_; }
  // One line for logs, in the plan's order (the first step's launch order):
  // "2 all-reduce buckets: 1.02 MiB, 1.53 MiB"
  // or "2 reduce-scatter buckets: 1.02 MiB, 1.53 MiB; optimizer sharded over 2 ranks".
  std::string describe() const;
  // Across hosts, one of them of several ranks, how the gradients cross them:
  // "hierarchical over 2 hosts (2,2 ranks)"; "" within one host.
  std::string describe_hosts() const;

 private:
  void check_parameters();
  bool sharded() const { return opts_.shard_optimizer; }
  bool sharded(size_t bucket) const { return sharded() && !replicated_[bucket]; }
  // ZeRO stage 2 for this bucket: its gradients pass through staging and only the block stays.
  bool staged(size_t bucket) const { return opts_.shard_gradients && sharded(bucket); }
  void on_grad_ready(int param);
  // Where parameter `param`'s gradient goes in its bucket (a staged bucket's
  // staging memory is taken here when it has none).
  float* staging_slot(size_t param);
  // Every parameter's gradient has arrived (unused ones zero-filled or
  // refused) and every bucket is launched; then the counts start over.
  void complete_arrivals();
  void end_micro_step();
  // Waits for bucket b's reduction; a staged bucket's block is added to its
  // gradient block and the staging memory given back.
  void complete(size_t b);
  // This rank's averaged gradients of bucket b, from the block's first element.
  float* averaged_block(size_t b) const;
  // The parameter's elements in a flat per-bucket tensor (its gradient in storage_).
  Tensor slice_of(const std::vector<Tensor>& flat, size_t param) const;
  // Elements [begin, end) of bucket b this rank reduces and updates (sharded).
  optim::ElementRange block_of(size_t b) const;
  Tensor on_the_wire(size_t b);
  // PowerSGD compresses bucket b this step.
  bool compresses(size_t b) const;
  // PowerSGD's next phase for bucket b once its current one is done (powersgd.h).
  void advance_powersgd(size_t b);
  void launch_ready_buckets();
  void broadcast_weights();
  // Parameter `param`'s gradient is in its bucket: one fewer to wait for.
  void arrive(size_t param);
  // After the first step: the launch order every rank takes from rank 0's.
  void learn_launch_order();
  // Note [Tables apart]: rows of table `param` handed over by a lookup.
  void take_rows(size_t param, const autograd::RowGradient& rows);
  // Note [Tables apart]: every rank's rows added into the averaged tables.
  void add_rows();
  // Tied tables' sinks on or off; sparse tables' stay on, and under ZeRO 2
  // (every micro-step reduced) all do: their rows pile up under no_sync().
  void keep_rows_apart(bool on);

  NamedParameters params_;
  comm::ProcessGroup& group_;
  DdpOptions opts_;
  std::vector<Bucket> plan_;
  std::vector<bool> replicated_;       // per bucket: all-reduced and stepped whole even when sharded
  std::vector<size_t> update_order_;   // sharded: the buckets in the order the optimizer updates them
  std::vector<std::vector<std::string>> update_batches_;  // sharded: their parameters' names, in that order
  std::vector<int64_t> padded_;        // per bucket: numel rounded up to equal aligned blocks (sharded)
  std::vector<Tensor> storage_;        // per bucket, registered: this rank's gradients, then their average
                                       // (staged: only while the bucket is being reduced)
  std::vector<Tensor> weights_;        // sharded: per bucket, registered; the parameters' values live here
  std::vector<Tensor> grad_blocks_;    // staged: per bucket, this rank's block of the averaged gradients
  std::vector<bool> block_fresh_;      // staged: the next reduction starts the block over (a new step)
  std::vector<size_t> in_flight_;      // staged buckets whose reduction runs, oldest first
  int64_t registered_bucket_bytes_ = 0;  // storage_ and weights_ in the group's registered memory
  std::vector<int> bucket_of_;         // parameter -> bucket
  std::vector<int64_t> offset_of_;     // parameter -> element offset in its bucket
  std::vector<int> pending_;           // per bucket: gradients still to arrive this step
  std::vector<bool> arrived_;          // per parameter: its gradient was copied in this step
  std::vector<comm::WorkPtr> work_;    // per bucket: the running reduction
  std::vector<Tensor> wire_;           // per bucket: its bf16 copy while reduced (DdpOptions::wire)
  std::vector<std::unique_ptr<PowerSgdBucket>> powersgd_;  // per bucket, with DdpOptions::powersgd
  std::vector<int> powersgd_phase_;    // per bucket: 0 none running, 1 the Ps' all-reduce, 2 the Qs'
  int64_t reduced_bytes_ = 0, reduced_bytes_last_ = 0;  // handed to collectives: this step, the last
  std::vector<size_t> launch_order_;   // buckets start in this order on every rank (launch_order())
  std::vector<size_t> ready_seen_;     // the first step: buckets in the order they became ready
  bool order_learned_ = false;
  struct Rows {
    std::vector<int64_t> rows;         // of the table, each once
    std::vector<float> values;         // rows.size() x the table's width: each row's lookups summed
    std::unordered_map<int64_t, size_t> index;  // row -> its place in rows
  };
  std::vector<size_t> tables_;         // parameters whose rows are kept apart (Note [Tables apart])
  std::vector<bool> gathered_;         // per bucket: a sparse table's, never reduced, its rows gathered
  std::vector<Rows> rows_;             // per entry of tables_: this step's rows so far
  int next_launch_ = 0;                // index into launch_order_
  bool sync_ = true;
  bool backward_since_finish_ = false;  // a gradient-ready hook fired since the last finish()
  // Inside step(): a sharded optimizer's step check lets only step() step it.
  std::shared_ptr<bool> stepping_ = std::make_shared<bool>(false);
  std::vector<uint64_t> hooks_;  // each parameter's grad-ready hook, removed at destruction
};

}  // namespace artel::parallel
