// DistributedDataParallel: synchronous data-parallel SGD.
//
// Every worker holds the whole model and computes gradients on its own share
// of the global batch; DDP averages them across workers so every replica takes
// the same optimizer step — the update of one worker with the whole batch.
// Parameters are broadcast from rank 0 at construction. Gradients are grouped
// into buckets (bucket_plan.h) kept in the backend's registered memory; as
// soon as every gradient of a bucket is final during backward (autograd's
// grad-ready hooks), the bucket's all-reduce starts asynchronously, so
// communication overlaps the rest of backward. Each parameter's slice of its
// bucket is its gradient destination (Note [Gradient destinations] in
// autograd/variable.h): ops that can write a gradient in place (Linear's
// weight and bias) put it straight into the bucket; others are copied in. finish() waits for all of them
// and points every parameter's gradient at its averaged slice.
//
//   DistributedDataParallel ddp(model.named_parameters(), *pg, {});
//   for (...) {
//     model.zero_grad();
//     loss.backward();          // all-reduces start during this
//     ddp.finish();             // exposed sync time is what this waits
//     optimizer.step();
//   }
//   { auto guard = ddp.no_sync(); micro_loss.backward(); }   // accumulate locally
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "artel/autograd/variable.h"
#include "artel/comm/process_group.h"
#include "artel/parallel/bucket_plan.h"

namespace artel::parallel {

struct DdpOptions {
  BucketOptions buckets;
  // false: a parameter that got no gradient in a step is an error naming it.
  // true: it counts as a zero gradient (PyTorch's find_unused_parameters).
  bool allow_unused_parameters = false;
};

class DistributedDataParallel {
 public:
  using NamedParameters = std::vector<std::pair<std::string, autograd::Variable>>;
  DistributedDataParallel(NamedParameters params, comm::ProcessGroup& group, const DdpOptions& opts);
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // Waits for every bucket's all-reduce and installs the averaged gradients.
  // Returns the time it spent waiting: the exposed synchronisation time.
  std::chrono::duration<double> finish();

  // While alive, backward passes only accumulate gradients locally.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(ddp) { ddp_.sync_ = false; }
    ~NoSync() { ddp_.sync_ = true; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
  };
  NoSync no_sync() { return NoSync(*this); }

  const std::vector<Bucket>& buckets() const { return plan_; }
  // One line for logs, in launch order: "2 all-reduce buckets: 22.0 KiB, 2.53 MiB".
  std::string describe() const;

 private:
  void on_grad_ready(int param);
  Tensor slice_of(size_t param) const;  // the parameter's gradient in its bucket
  void launch_ready_buckets();

  NamedParameters params_;
  comm::ProcessGroup& group_;
  DdpOptions opts_;
  std::vector<Bucket> plan_;
  std::vector<Tensor> storage_;        // one flat registered tensor per bucket
  std::vector<int> bucket_of_;         // parameter -> bucket
  std::vector<int64_t> offset_of_;     // parameter -> element offset in its bucket
  std::vector<int> pending_;           // per bucket: gradients still to arrive this step
  std::vector<bool> arrived_;          // per parameter: its gradient was copied in this step
  std::vector<comm::WorkPtr> work_;    // per bucket: the running all-reduce
  int next_launch_ = 0;                // buckets start in index order on every rank
  bool sync_ = true;
};

}  // namespace artel::parallel
