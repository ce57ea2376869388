// FullyShardedDataParallel: ZeRO stage 3 (PyTorch's FSDP). Weights,
// gradients and optimizer state are all sharded at rest: with N ranks each
// holds 1/N of every unit's parameters, flat, and the optimizer steps only
// that. A unit's whole weights exist only while it runs (Note [Units]).
//
// A unit is a piece of the model's plan (nn/parallel_plan.h: a GPT block, an
// MLP layer) with the parameters only that piece uses, laid out flat and cut
// into N equal blocks; the parameters several pieces share (a tied
// embedding) or none uses make the root unit. The model calls back around
// every piece (nn::PieceHooks), and there the unit is gathered:
//   - forward: the unit's weights are all-gathered just before its piece runs
//     (the next unit's gather is issued then too, so it overlaps this one's
//     compute), and freed after it (unless reshard_after_forward is false:
//     FSDP's SHARD_GRAD_OP, kept until backward);
//   - backward: each output of the piece carries a hook that gathers the
//     unit again (and prefetches the unit before it) before any op that
//     saved its weights runs backward; once every gradient of the unit is
//     final, it is copied into staging memory, reduce-scattered (at most two
//     in flight), this rank's block added to its gradient shard, and the
//     weights freed.
// Nothing is ever gathered for the whole model: construction draws (or
// reads) one unit at a time, and so do the weights files (for_each_whole).
// Micro-steps are reduced each, as in ZeRO stage 2 (Note [Sharded gradients]).
//
//   FullyShardedDataParallel fsdp(model, *pg, {}, [&](const nn::DeclaredParameter& d) { return draw(d); });
//   AdamW opt(decay_groups(fsdp.parameters(), lr, wd));
//   fsdp.shard(opt);                  // the optimizer steps the shards
//   loss = cross_entropy(model.forward(x), y); loss.backward();
//   fsdp.finish();                    // the last reductions; averaged gradient shards ready
//   opt.step();
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "artel/comm/process_group.h"
#include "artel/nn/model.h"
#include "artel/optim/clip.h"
#include "artel/optim/optimizer.h"

namespace artel::parallel {

struct FsdpOptions {
  // false: a unit's gathered weights stay from its forward to its backward
  // (no second gather, more memory; FSDP's reshard_after_forward=False).
  bool reshard_after_forward = true;
  // As DdpOptions: a parameter without a gradient counts as a zero one.
  bool allow_unused_parameters = false;
};

class FullyShardedDataParallel : public nn::PieceHooks {
 public:
  // Units reduce-scattered at once, each holding its whole gradients in
  // staging memory; a unit's backward waits for the oldest to finish.
  static constexpr size_t kReducesInFlight = 2;
  // A parameter's whole value (drawn from the seed, or read from a file): asked
  // for unit by unit, each kept only until its unit is cut into shards.
  using WholeValue = std::function<Tensor(const nn::DeclaredParameter&)>;
  // Shards the declared `model` over `group` and hooks into its pieces.
  // Every rank must pass the same values (the ranks' parameter names and
  // shapes are compared). Once this is destroyed the model refuses to run,
  // and a backward through a forward it ran refuses too: the shards are gone.
  // The model may itself be gone first.
  FullyShardedDataParallel(nn::Model& model, comm::ProcessGroup& group, FsdpOptions opts, const WholeValue& whole);
  ~FullyShardedDataParallel() override;
  FullyShardedDataParallel(const FullyShardedDataParallel&) = delete;
  FullyShardedDataParallel& operator=(const FullyShardedDataParallel&) = delete;

  // The model's parameters, for the optimizer: their values exist only while gathered.
  nn::NamedParameters parameters() const { return params_; }
  // Tells `opt` which elements this rank steps, where they live and where
  // their averaged gradients are. Call once, before the first step.
  void shard(optim::Optimizer& opt);
  // Zero-fills (or refuses) unused gradients, waits for the last
  // reductions and frees every gathered unit -> seconds waited.
  std::chrono::duration<double> finish();
  // The elements of parameter `name` this rank keeps (flat; shard() made them
  // the optimizer's), and which ones they are.
  Tensor owned_value(const std::string& name) const;
  // The global norm of the averaged gradient shards (summed over ranks);
  // clipping hands optim::clip_coefficient of it to the optimizer step. Collective.
  float grad_norm();
  // Calls visit(name, whole value) for every parameter, a unit gathered at a
  // time, in unit order. Collective.
  void for_each_whole(const std::function<void(const std::string&, const Tensor&)>& visit);

  // Bytes: the weight shards plus the most gathered at once; the gradient shards.
  int64_t parameter_bytes() const { return shard_bytes_ + peak_gathered_bytes_; }
  int64_t peak_gathered_bytes() const { return peak_gathered_bytes_; }
  int64_t gradient_bytes() const { return shard_bytes_; }
  // The most gradient staging held at once (units being reduce-scattered).
  int64_t peak_staging_bytes() const { return peak_staging_bytes_; }
  // "5 units of 26.0 KiB ... 1.25 MiB, sharded over 2 ranks; gathered per forward and backward"
  std::string describe() const;

  // While alive, backward marks the end of a micro-step (its reductions run on).
  class NoSync {
   public:
    explicit NoSync(FullyShardedDataParallel& f) : f_(f) {}
    ~NoSync() { f_.complete_arrivals(); }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    FullyShardedDataParallel& f_;
  };

  // nn::PieceHooks
  void before_forward(size_t piece) override;
  nn::Activations after_forward(size_t piece, nn::Activations out) override;

 private:
  struct Unit;
  void gather_async(int unit);
  void wait_gathered(int unit);
  void reshard(int unit);
  void before_backward(size_t piece);
  void on_grad_ready(size_t param);
  float* staging_slot(size_t param);
  void stage(int unit);
  void launch(int unit);
  void complete(int unit);
  void complete_arrivals();
  int unit_before(size_t piece) const;
  int unit_after(size_t piece) const;

  nn::Model& model_;
  comm::ProcessGroup& group_;
  FsdpOptions opts_;
  nn::NamedParameters params_;
  std::vector<std::unique_ptr<Unit>> units_;
  int root_ = -1;                      // the unit of shared parameters, or -1
  std::vector<int> unit_of_piece_;     // -1: the piece uses no unit's parameters but the root's
  std::vector<int> unit_of_param_;
  std::vector<int64_t> offset_of_param_;
  std::vector<bool> arrived_;
  std::vector<int> in_flight_;         // units being reduced, oldest first
  std::vector<uint64_t> hooks_;        // each parameter's grad-ready hook, removed at destruction
  std::shared_ptr<nn::PieceHooksLink> link_;  // the model's way to this, emptied at destruction
  bool sharded_ = false;                      // shard() told an optimizer where the shards are
  // A gradient arrived since the last finish(): the shards' reductions are
  // unfinished. Shared with the optimizer's step check, which may outlive this.
  std::shared_ptr<bool> unreduced_ = std::make_shared<bool>(false);
  std::shared_ptr<BufferCache> unit_cache_;  // Note [Reused unit memory]
  std::map<std::string, Tensor> values_;  // parameter -> its owned elements, views of the shards
  int64_t shard_bytes_ = 0;
  int64_t gathered_bytes_ = 0, peak_gathered_bytes_ = 0;
  int64_t staging_bytes_ = 0, peak_staging_bytes_ = 0;
};

}  // namespace artel::parallel
