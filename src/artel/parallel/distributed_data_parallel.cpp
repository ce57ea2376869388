#include "artel/parallel/distributed_data_parallel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <utility>

#include "artel/kernels/accumulate.h"
#include "artel/optim/clip.h"
#include "artel/parallel/group_buffers.h"
#include "artel/parallel/wrapped_parameters.h"
#include "artel/core/memory_stats.h"

namespace artel::parallel {
namespace {

// Sharded gradients: buckets being reduced at once, each holding its staging memory.
constexpr size_t kStagedInFlight = 2;

std::string kib_or_mib(int64_t bytes) {
  char s[32];
  if (bytes < 1024)
    std::snprintf(s, sizeof s, "%lld B", static_cast<long long>(bytes));
  else if (bytes < (1 << 20))
    std::snprintf(s, sizeof s, "%.1f KiB", static_cast<double>(bytes) / 1024);
  else
    std::snprintf(s, sizeof s, "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  return s;
}

using Clock = std::chrono::steady_clock;

}  // namespace

// Note [Sharded optimizer step]
// The optimizers are elementwise (optim/optimizer.h), so the step of one
// element needs only that element's weight, averaged gradient and state. With
// N ranks, rank r takes block r of every bucket (1/N of its elements, padded
// to equal aligned blocks):
//   - backward: the bucket is reduce-scattered in place instead of all-reduced:
//     block r of rank r's bucket then holds the averaged gradients (the rest
//     keeps the rank's own, which nothing reads);
//   - step: the optimizer updates block r only (Optimizer::shard), so each
//     rank keeps its state current for 1/N of the elements and spends 1/N of
//     the time;
//   - then the weights are all-gathered in place: they live in registered
//     per-bucket buffers laid out as the gradients (weights_), so block r of
//     every rank lands in everyone's copy without a copy out.
// reduce-scatter + all-gather is what a two-shot all-reduce moves anyway, so
// the bytes on the wire do not change; the optimizer's work and its reads of
// the state shrink N-fold. Every element is computed once, from the same
// inputs as a replicated step would use, so the weights are bit-identical.
// The state outside block r is stale on rank r; gather_optimizer_state() puts
// the parts together before a checkpoint, which therefore stays the
// unsharded one (any world size, sharded or not, can resume it).

// Note [Sharded gradients]
// ZeRO stage 2 keeps the stage-1 step and drops the whole gradients: a rank
// holds only its block of each bucket's averaged gradient (grad_blocks_,
// 1/N of them). Backward still produces each parameter's whole gradient;
// as it becomes final it is copied into its bucket's staging memory (taken
// when the bucket's first gradient arrives) and the parameter lets go of it.
// The bucket's other parameters get their slices of it as gradient
// destinations meanwhile, so most gradients are written there in place.
// A full bucket is reduce-scattered from there and, once done, its block is
// added into grad_blocks_ and the staging memory given back; at most
// kStagedInFlight buckets are in flight, so staging stays a couple of
// buckets whatever the model's size. The optimizer reads the blocks
// (Optimizer::shard's grads). Accumulation over micro-steps cannot keep a
// whole gradient either, so every micro-step is reduced and the blocks sum
// them: the average of sums becomes the sum of averages, equal up to float
// rounding.

DistributedDataParallel::DistributedDataParallel(NamedParameters params, comm::ProcessGroup& group,
                                                 const DdpOptions& opts)
    : params_(std::move(params)), group_(group), opts_(opts) {
  check_parameters();
  // Replicated parameters of a sharded step go into one bucket of their own,
  // last; before it, each table whose rows go apart (Note [Tables apart]:
  // not with PowerSGD, which compresses a tied table's gradient; Note
  // [Sparse tables]: always).
  std::vector<int> planned, kept;
  std::vector<bool> sparse_tables;  // per entry of tables_
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string& name = params_[i].first;
    const bool sparse = opts_.sparse_tables && opts_.sparse_tables(name);
    if (sharded() && opts_.replicate && opts_.replicate(name)) kept.push_back(static_cast<int>(i));
    else if (sparse || (!opts_.powersgd && opts_.tables && opts_.tables(name) &&
                        table_kept_apart(static_cast<double>(params_[i].second.numel()), opts_.buckets)))
      tables_.push_back(i), sparse_tables.push_back(sparse);
    else planned.push_back(static_cast<int>(i));
  }
  std::vector<int64_t> numels;
  for (int i : planned) numels.push_back(params_[static_cast<size_t>(i)].second.numel());
  plan_ = plan_buckets(numels, opts_.buckets);
  for (Bucket& b : plan_)
    for (int& i : b.params) i = planned[static_cast<size_t>(i)];
  gathered_.assign(plan_.size(), false);
  for (size_t t = 0; t < tables_.size(); ++t) {
    plan_.push_back({.params = {static_cast<int>(tables_[t])}, .offsets = {0}, .numel = params_[tables_[t]].second.numel()});
    gathered_.push_back(sparse_tables[t]);
  }
  replicated_.assign(plan_.size(), false);
  if (!kept.empty()) {
    Bucket b;
    for (int i : kept) b.params.push_back(i), b.offsets.push_back(b.numel), b.numel += params_[static_cast<size_t>(i)].second.numel();
    plan_.push_back(b);
    replicated_.push_back(true);
    gathered_.push_back(false);
  }
  if (sharded()) {  // the update's batches, smallest bucket first (Note [Gathers while the optimizer steps])
    update_order_.resize(plan_.size());
    std::iota(update_order_.begin(), update_order_.end(), size_t{0});
    std::stable_sort(update_order_.begin(), update_order_.end(),
                     [&](size_t x, size_t y) { return plan_[x].numel < plan_[y].numel; });
    for (size_t b : update_order_) {
      update_batches_.emplace_back();
      for (int i : plan_[b].params) update_batches_.back().push_back(params_[static_cast<size_t>(i)].first);
    }
  }
  bucket_of_.assign(params_.size(), -1);
  offset_of_.assign(params_.size(), 0);
  AllocationPurpose purpose("the gradient buckets");
  for (size_t b = 0; b < plan_.size(); ++b) {
    const int64_t quantum = sharded(b) ? kBlockAlign * group_.size() : 1;
    padded_.push_back((plan_[b].numel + quantum - 1) / quantum * quantum);
    // zeroed: the padding takes part in the reductions
    storage_.push_back(staged(b) ? Tensor() : registered_or_plain(group_, padded_[b], &registered_bucket_bytes_));
    weights_.push_back(sharded(b) ? registered_or_plain(group_, padded_[b], &registered_bucket_bytes_) : Tensor());
    grad_blocks_.push_back(staged(b) ? Tensor::zeros({padded_[b] / group_.size()}) : Tensor());
    for (size_t j = 0; j < plan_[b].params.size(); ++j) {
      bucket_of_[static_cast<size_t>(plan_[b].params[j])] = static_cast<int>(b);
      offset_of_[static_cast<size_t>(plan_[b].params[j])] = plan_[b].offsets[j];
    }
  }
  ARTEL_CHECK(!opts_.shard_gradients || kept.empty(), "sharded gradients keep no whole gradient, and ",
              params_[static_cast<size_t>(kept.empty() ? 0 : kept[0])].first,
              " needs one (a weight tied across pipeline stages): use --zero 1 with --pp");
  block_fresh_.assign(plan_.size(), true);
  pending_.resize(plan_.size());
  work_.resize(plan_.size());
  wire_.resize(plan_.size());
  ARTEL_CHECK(opts_.wire == DType::f32 || opts_.wire == DType::bf16, "gradients go on the wire as float32 or bfloat16, not ",
              dtype_name(opts_.wire));
  powersgd_.resize(plan_.size());
  powersgd_phase_.assign(plan_.size(), 0);
  if (opts_.powersgd) {
    ARTEL_CHECK(!opts_.shard_gradients, "PowerSGD compresses whole gradients, and sharded gradients (ZeRO 2) keep none: ",
                "use --zero 0 or 1 with --grad-compression powersgd");
    ARTEL_CHECK(opts_.wire == DType::f32, "PowerSGD and a bf16 wire are two compressions: choose one");
    for (size_t b = 0; b < plan_.size(); ++b) {
      if (gathered_[b]) continue;  // nothing reduced: its rows are exact and few
      std::vector<BucketMatrix> grads;
      for (size_t j = 0; j < plan_[b].params.size(); ++j) {
        const Shape& shape = params_[static_cast<size_t>(plan_[b].params[j])].second.shape();
        const int64_t numel = params_[static_cast<size_t>(plan_[b].params[j])].second.numel();
        const int64_t rows = shape.size() >= 2 ? shape[0] : numel;  // (first dimension, the rest); a vector stays one
        grads.push_back({plan_[b].offsets[j], rows, rows ? numel / rows : 0});
      }
      PowerSgdOptions o = *opts_.powersgd;
      o.algorithm = opts_.all_reduce_algorithm;
      o.seed += 1000003 * b;  // each bucket's Qs their own draws
      powersgd_[b] = std::make_unique<PowerSgdBucket>(std::move(grads), group_, o);
    }
  }
  arrived_.assign(params_.size(), false);
  for (size_t b = 0; b < plan_.size(); ++b) pending_[b] = static_cast<int>(plan_[b].params.size());
  launch_order_.resize(plan_.size());
  std::iota(launch_order_.begin(), launch_order_.end(), size_t{0});

  broadcast_weights();
  for (size_t i = 0; i < params_.size(); ++i) {
    int index = static_cast<int>(i);
    hooks_.push_back(params_[i].second.add_grad_ready_hook([this, index](autograd::Variable&) { on_grad_ready(index); }));
    const size_t b = static_cast<size_t>(bucket_of_[i]);
    if (!staged(b) && !gathered_[b]) params_[i].second.set_grad_destination(slice_of(storage_, i));
  }
  rows_.resize(tables_.size());
  keep_rows_apart(true);
}

// What the buckets assume of the parameters, checked before any is copied:
// each materialised float32 (an int64's bytes overflowed a float bucket
// sized by elements), and what every wrapper assumes (wrapped_parameters.h).
void DistributedDataParallel::check_parameters() {
  std::vector<WrappedParameter> wrapped;
  for (const auto& [name, v] : params_) {
    const std::string where = "DistributedDataParallel: parameter '" + name + "'";
    ARTEL_CHECK(v.defined() && v.value().defined(), where, " has no value: it was declared but not materialised",
                " (hint: nn::materialize the model, or build its shard, before wrapping its parameters)");
    ARTEL_CHECK(v.value().dtype() == DType::f32, where, " is ", dtype_name(v.value().dtype()),
                "; gradients are averaged in float32 buckets (hint: keep other types out of the list)");
    wrapped.push_back({name, v.shape(), v});
  }
  check_wrapped_parameters("DistributedDataParallel", wrapped, group_);
}

DistributedDataParallel::~DistributedDataParallel() {
  for (size_t i = 0; i < params_.size(); ++i) {
    autograd::Variable& p = params_[i].second;
    if (i < hooks_.size()) p.remove_grad_ready_hook(hooks_[i]);  // it points at this DDP
    p.set_grad_destination(Tensor());
    p.set_row_gradient_sink(nullptr);  // so does a table's sink
    // The registered buffers go back to the group, which may hand them out again.
    if (sharded(static_cast<size_t>(bucket_of_[i]))) p.value() = p.value().clone();
  }
}

// Every replica starts from rank 0's weights: broadcast bucket by bucket. When
// sharded, the parameters then live in weights_ (Note [Sharded optimizer step]).
void DistributedDataParallel::broadcast_weights() {
  for (size_t b = 0; b < plan_.size(); ++b) {
    Tensor flat = sharded(b) ? weights_[b] : storage_[b];
    for (int param : plan_[b].params) {
      const Tensor& v = params_[static_cast<size_t>(param)].second.value();
      std::memcpy(flat.data<float>() + offset_of_[static_cast<size_t>(param)], v.raw(), v.nbytes());
    }
    group_.broadcast(flat, {.root = 0})->wait();
    for (int param : plan_[b].params) {
      const size_t i = static_cast<size_t>(param);
      Tensor& v = params_[i].second.value();
      if (sharded(b)) v = slice_of(weights_, i);
      else std::memcpy(v.raw(), flat.data<float>() + offset_of_[i], v.nbytes());
    }
    if (!sharded(b)) storage_[b].zero();
  }
}

std::string DistributedDataParallel::describe_hosts() const {
  const std::string hosts = group_.hosts();
  if (hosts.empty()) return "";
  const std::string& a = opts_.all_reduce_algorithm;
  const bool all_reduce_hierarchical = a == "auto" || a == "hierarchical";
  // Hosts of unequal rank counts reduce-scatter by ring: the blocks are the ranks'.
  const bool scatter_hierarchical = group_.hierarchical_blocks();
  if (all_reduce_hierarchical && (!sharded() || scatter_hierarchical)) return "hierarchical over " + hosts;
  return "all-reduces " + (all_reduce_hierarchical ? std::string("hierarchical") : a) + " over " + hosts +
         (sharded() ? std::string(", reduce-scatters ") + (scatter_hierarchical ? "hierarchical" : "ring") : "");
}

std::string DistributedDataParallel::describe() const {
  std::string s = std::to_string(plan_.size()) + (sharded() ? " reduce-scatter bucket" : " all-reduce bucket") +
                  (plan_.size() == 1 ? "" : "s") + ":";
  for (size_t b = 0; b < plan_.size(); ++b) {
    const std::string& first = params_[static_cast<size_t>(plan_[b].params[0])].first;
    const bool table = std::find(tables_.begin(), tables_.end(), static_cast<size_t>(plan_[b].params[0])) != tables_.end();
    s += (b ? ", " : " ") + kib_or_mib(plan_[b].numel * 4) + (sharded() && replicated_[b] ? " (all-reduced, stepped whole)" : "") +
         (gathered_[b] ? " (" + first + ", sparse: only its rows gathered)"
          : table      ? " (" + first + ", its lookup's rows gathered apart)"
                       : "");
  }
  if (sharded()) s += std::string(opts_.shard_gradients ? "; optimizer and gradients" : "; optimizer") +
                     " sharded over " + std::to_string(group_.size()) + " ranks";
  if (opts_.wire == DType::bf16) s += "; gradients reduced in bf16";
  if (opts_.powersgd) {
    int compressed = 0;
    int64_t numel = 0, sent = 0;
    for (size_t b = 0; b < plan_.size(); ++b) {
      if (!powersgd_[b]) continue;  // a sparse table's: its rows are gathered
      compressed += powersgd_[b]->compressed_count();
      numel += plan_[b].numel;
      sent += powersgd_[b]->compressed_count() ? powersgd_[b]->compressed_numel() : plan_[b].numel;
    }
    char line[160];
    std::snprintf(line, sizeof line, "; PowerSGD rank %d from step %lld: %d of %zu gradients compressed, %.1f%% of the elements reduced",
                  opts_.powersgd->rank, static_cast<long long>(opts_.powersgd->start_step + 1), compressed, params_.size(),
                  100.0 * static_cast<double>(sent) / static_cast<double>(std::max<int64_t>(numel, 1)));
    s += line;
  }
  return s;
}

Tensor DistributedDataParallel::slice_of(const std::vector<Tensor>& flat, size_t param) const {
  const autograd::Variable& p = params_[param].second;
  const int64_t off = offset_of_[param];
  return flat[static_cast<size_t>(bucket_of_[param])].slice0(off, off + p.numel()).view(p.shape());
}

optim::ElementRange DistributedDataParallel::block_of(size_t b) const {
  if (!sharded(b)) return {0, padded_[b]};
  const int64_t block = padded_[b] / group_.size();
  return {group_.rank() * block, (group_.rank() + 1) * block};
}

void DistributedDataParallel::on_grad_ready(int param) {
  backward_since_finish_ = true;
  if (!sync_ && !opts_.shard_gradients) return;
  size_t i = static_cast<size_t>(param);
  autograd::Variable& p = params_[i].second;
  const size_t b = static_cast<size_t>(bucket_of_[i]);
  if (gathered_[b]) {  // Note [Sparse tables]: its rows went to take_rows
    ARTEL_CHECK(!p.grad().defined(), "DistributedDataParallel: '", params_[i].first, "' is a sparse table, whose ",
                "gradient is the rows its lookups read, but it got a dense gradient too (tied to a head, or used ",
                "outside a lookup?) (hint: make the table dense, nn::Embedding::set_sparse(false))");
    arrive(i);
    launch_ready_buckets();
    return;
  }
  if (!p.grad().defined()) return;  // no gradient reached it: finish() reports or zero-fills it
  float* slot = staging_slot(i);
  if (p.grad().raw() != slot) std::memcpy(slot, p.grad().raw(), p.grad().nbytes());  // else written in place by backward
  if (staged(b)) p.zero_grad();  // Note [Sharded gradients]: the whole gradient is not kept
  arrive(i);
  launch_ready_buckets();
}

void DistributedDataParallel::arrive(size_t param) {
  arrived_[param] = true;
  const size_t b = static_cast<size_t>(bucket_of_[param]);
  if (--pending_[b] == 0 && !order_learned_) ready_seen_.push_back(b);
}

float* DistributedDataParallel::staging_slot(size_t param) {
  const size_t b = static_cast<size_t>(bucket_of_[param]);
  if (staged(b) && work_[b]) complete(b);  // the previous micro-step's reduction of this bucket
  if (staged(b) && !storage_[b].defined()) {
    // Every slot is written (a gradient, or zeros for an unused one): only the padding needs zeros.
    storage_[b] = registered_or_plain(group_, padded_[b], nullptr, plan_[b].numel);
    for (int other : plan_[b].params)
      if (!arrived_[static_cast<size_t>(other)] && static_cast<size_t>(other) != param)
        params_[static_cast<size_t>(other)].second.set_grad_destination(slice_of(storage_, static_cast<size_t>(other)));
  }
  return storage_[b].data<float>() + offset_of_[param];
}

bool DistributedDataParallel::compresses(size_t b) const {
  return powersgd_[b] && powersgd_[b]->compressing() && powersgd_[b]->compressed_count() > 0;
}

void DistributedDataParallel::advance_powersgd(size_t b) {
  work_[b]->wait();
  float* bucket = storage_[b].data<float>();
  if (powersgd_phase_[b] == 1) {
    work_[b] = powersgd_[b]->middle(bucket);
    powersgd_phase_[b] = 2;
    return;
  }
  work_[b].reset();
  powersgd_[b]->end(bucket);
  powersgd_phase_[b] = 0;
}

void DistributedDataParallel::complete(size_t b) {
  while (powersgd_phase_[b]) advance_powersgd(b);
  if (!work_[b]) return;
  work_[b]->wait();
  work_[b].reset();
  if (wire_[b].defined()) {  // widen the average (a sharded bucket's: only this rank's block) back
    const optim::ElementRange range = sharded(b) ? block_of(b) : optim::ElementRange{0, padded_[b]};
    const bf16* from = wire_[b].data<bf16>() + range.begin;
    float* to = storage_[b].data<float>() + range.begin;
    for (int64_t i = 0; i < range.size(); ++i) to[i] = static_cast<float>(from[i]);
    wire_[b] = Tensor();
  }
  if (!staged(b)) return;
  const optim::ElementRange block = block_of(b);
  const float* averaged = storage_[b].data<float>() + block.begin;
  float* into = grad_blocks_[b].data<float>();
  if (block_fresh_[b]) std::memcpy(into, averaged, static_cast<size_t>(block.size()) * sizeof(float));
  else kernels::add_into(into, averaged, block.size());
  block_fresh_[b] = false;
  storage_[b] = Tensor();
  in_flight_.erase(std::find(in_flight_.begin(), in_flight_.end(), b));
}

int64_t DistributedDataParallel::gradient_bytes() const {
  int64_t n = 0;
  for (size_t b = 0; b < plan_.size(); ++b) n += staged(b) ? grad_blocks_[b].numel() : padded_[b];
  return n * static_cast<int64_t>(sizeof(float));
}

float* DistributedDataParallel::averaged_block(size_t b) const {
  return staged(b) ? static_cast<float*>(grad_blocks_[b].raw()) : static_cast<float*>(storage_[b].raw()) + block_of(b).begin;
}

// The tensor bucket b is reduced in: its storage, or a bf16 copy of it.
Tensor DistributedDataParallel::on_the_wire(size_t b) {
  if (opts_.wire == DType::f32) return storage_[b];
  wire_[b] = Tensor::empty({padded_[b]}, DType::bf16);
  const float* from = storage_[b].data<float>();
  bf16* to = wire_[b].data<bf16>();
  for (int64_t i = 0; i < padded_[b]; ++i) to[i] = bf16(from[i]);
  return wire_[b];
}

void DistributedDataParallel::launch_ready_buckets() {
  while (next_launch_ < static_cast<int>(plan_.size()) && pending_[launch_order_[static_cast<size_t>(next_launch_)]] == 0) {
    const size_t b = launch_order_[static_cast<size_t>(next_launch_++)];
    if (gathered_[b]) {  // nothing to reduce: the block starts from zeros, and finish() adds the ranks' rows
      const optim::ElementRange block = block_of(b);
      (staged(b) ? grad_blocks_[b] : storage_[b].slice0(block.begin, block.end)).zero();
      continue;
    }
    if (compresses(b)) {  // the whole averaged gradient comes back on every rank, sharded step or not
      work_[b] = powersgd_[b]->begin(storage_[b].data<float>());
      powersgd_phase_[b] = 1;
      reduced_bytes_ += powersgd_[b]->compressed_numel() * static_cast<int64_t>(sizeof(float));
      continue;
    }
    if (powersgd_[b]) powersgd_[b]->count_plain_step();
    Tensor reduced = on_the_wire(b);
    reduced_bytes_ += static_cast<int64_t>(reduced.nbytes());
    if (sharded(b)) {
      const optim::ElementRange block = block_of(b);
      work_[b] = group_.reduce_scatter(reduced, reduced.slice0(block.begin, block.end), {.op = comm::ReduceOp::avg});
      if (staged(b)) {
        // The next micro-step's gradients must not land in memory being reduced.
        for (int param : plan_[b].params) params_[static_cast<size_t>(param)].second.set_grad_destination(Tensor());
        in_flight_.push_back(b);
        if (in_flight_.size() > kStagedInFlight) complete(in_flight_.front());
      }
    } else {
      work_[b] = group_.all_reduce(reduced, {.op = comm::ReduceOp::avg, .algorithm = opts_.all_reduce_algorithm});
    }
  }
}

void DistributedDataParallel::complete_arrivals() {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (arrived_[i]) continue;
    ARTEL_CHECK(opts_.allow_unused_parameters, "parameter '", params_[i].first,
                "' received no gradient in this step, so its all-reduce would never start",
                " (hint: make it take part in the loss, or allow unused parameters)");
    if (!gathered_[static_cast<size_t>(bucket_of_[i])]) std::memset(staging_slot(i), 0, params_[i].second.value().nbytes());
    arrive(i);
  }
  launch_ready_buckets();
  for (size_t b = 0; b < plan_.size(); ++b) pending_[b] = static_cast<int>(plan_[b].params.size());
  arrived_.assign(params_.size(), false);
  next_launch_ = 0;
}

void DistributedDataParallel::end_micro_step() {
  complete_arrivals();  // the reductions run on; the next micro-step's gradients queue behind them
}

std::chrono::duration<double> DistributedDataParallel::finish() {
  ARTEL_CHECK(sync_, "DistributedDataParallel::finish() inside no_sync(): the gradients of these micro-steps are "
              "kept on this rank, not averaged (hint: let the guard end, then run the last backward and finish())");
  ARTEL_CHECK(backward_since_finish_ || params_.empty(), "DistributedDataParallel::finish() with no backward since "
              "the last finish() (hint: call it once after each step's backward)");
  backward_since_finish_ = false;
  auto start = Clock::now();
  complete_arrivals();
  // PowerSGD: every bucket's second all-reduce queued before any is waited for.
  for (size_t b = 0; b < plan_.size(); ++b)
    if (powersgd_phase_[b] == 1) advance_powersgd(b);
  for (size_t b = 0; b < plan_.size(); ++b) {
    if (work_[b]) complete(b);
    block_fresh_[b] = true;  // the next step's first reduction starts the block over
    if (staged(b)) continue;  // the optimizer reads the block (shard())
    for (int param : plan_[b].params) {
      // The averaged gradient is read in place from the bucket (no copy back).
      params_[static_cast<size_t>(param)].second.set_grad(slice_of(storage_, static_cast<size_t>(param)));
    }
  }
  add_rows();
  reduced_bytes_last_ = std::exchange(reduced_bytes_, 0);
  if (!order_learned_) learn_launch_order();
  return Clock::now() - start;
}

void DistributedDataParallel::learn_launch_order() {
  order_learned_ = true;
  const int64_t n = static_cast<int64_t>(plan_.size());
  if (n == 0) return;
  // Every bucket became ready once in the first step (complete_arrivals fills
  // in the unused), so its first n entries hold each bucket once.
  ARTEL_CHECK(static_cast<int64_t>(ready_seen_.size()) >= n, "DistributedDataParallel: ", ready_seen_.size(),
              " of ", n, " buckets became ready in the first step");
  Tensor order = Tensor::empty({n}, DType::i64);
  for (int64_t k = 0; k < n; ++k) order.data<int64_t>()[k] = static_cast<int64_t>(ready_seen_[static_cast<size_t>(k)]);
  group_.broadcast(order, {.root = 0})->wait();  // one order on every rank, or their collectives would pair wrongly
  for (int64_t k = 0; k < n; ++k) launch_order_[static_cast<size_t>(k)] = static_cast<size_t>(order.data<int64_t>()[k]);
  ready_seen_ = {};
}

// Note [Tables apart]
// A table tied to a language model's head (GPT-2's wte: 38.6 M of its 124 M
// parameters) gets two gradients in a backward: the head's, dense and first,
// and the lookup's, a few rows and last. Summed in one tensor, the table's
// bucket could start only when backward ended, and its 154 MB reduction was
// all exposed: 31 ms a step on shared memory (16-core Emerald Rapids), about
// 1.2 s over a 1 Gbit/s link. Instead the table is a bucket of its own with a
// row sink (autograd's Note [Row gradients]): the bucket holds the dense
// gradient and starts as soon as the head's backward is done, and the
// lookup's rows wait aside, each row once with its lookups summed in lookup
// order as the dense gradient sums them (at most 4 x 256 tokens: 1024 rows
// of 768, 3 MiB a rank; a byte-level text's 65 distinct rows, 195 KiB).
// finish() all-gathers every rank's rows and adds each, divided by the ranks,
// into the averaged table (in a sharded step: the part in this rank's block,
// kept in its gradient block under ZeRO 2),
// rank by rank in one order: what the dense average would hold, up to float
// rounding, and the same bits at every ZeRO stage. Where the ranks' rows
// would outnumber the table's (N x rows > V: GPT-2's 50,304 rows at 1024
// tokens a rank, past 49 ranks), the gather would move more than a dense
// reduction: the rows are then scattered into a zero table on each rank
// and that is all-reduced, still after backward.
// From the second step the bucket starts first (launch_order()). Only a
// table of a bucket's size or more is kept so (table_kept_apart).

// Note [Sparse tables]
// A table that is only looked up (nn::Embedding::sparse: wordlm's 14,565
// words x 128, 7.1 MiB) gets a step's gradient in the rows its batch read,
// and zeros elsewhere that a dense bucket would all-reduce every step. Its
// row sink takes every lookup's rows (rows_only, Note [Row gradients]), so
// its bucket holds no gradient: when its lookups are done the bucket's block
// is zeroed instead of reduced, and finish() gathers and adds the ranks'
// rows as for a tied table. Under no_sync() the sink stays on and the rows
// pile up, so accumulated micro-steps move their rows too; so do a tied
// table's under ZeRO 2, which reduces every micro-step's dense gradient
// (its bucket then starts early in each). What moves is
// ranks x distinct rows x (C + 2) words instead of the table (wordlm, 16 x 32
// words a rank: 0.13 MB against 7.5 MB), and the bytes handed over
// (reduced_bytes_last_step) count the rows.
void DistributedDataParallel::keep_rows_apart(bool on) {
  for (size_t t = 0; t < tables_.size(); ++t) {
    const bool sparse = gathered_[static_cast<size_t>(bucket_of_[tables_[t]])];
    autograd::RowGradientSink sink;
    if (on || sparse || opts_.shard_gradients) sink = [this, t](const autograd::RowGradient& r) { take_rows(t, r); };
    params_[tables_[t]].second.set_row_gradient_sink(std::move(sink), /*rows_only=*/sparse);
  }
}

void DistributedDataParallel::take_rows(size_t table, const autograd::RowGradient& r) {
  const autograd::Variable& p = params_[tables_[table]].second;
  const int64_t rows = p.size(0), width = rows ? p.numel() / rows : 0;
  Rows& kept = rows_[table];
  const float* g = r.grad.data<float>();
  auto take = [&](const auto* ids) {
    for (int64_t k = 0; k < r.ids.numel(); ++k) {
      const int64_t row = static_cast<int64_t>(ids[k]) - r.first_row;
      if (row < 0 || row >= rows) continue;  // a row of another shard of the table (vocabulary-parallel)
      const auto [at, fresh] = kept.index.try_emplace(row, kept.rows.size());
      if (!fresh) {  // summed here, in lookup order, as the dense gradient would sum it
        kernels::add_into(kept.values.data() + at->second * static_cast<size_t>(width), g + k * width, width);
        continue;
      }
      kept.rows.push_back(row);
      kept.values.insert(kept.values.end(), g + k * width, g + (k + 1) * width);
    }
  };
  if (r.ids.dtype() == DType::i64) take(r.ids.data<int64_t>());
  else take(r.ids.data<int32_t>());
}

void DistributedDataParallel::add_rows() {
  if (tables_.empty()) return;
  const int64_t ranks = group_.size(), count = static_cast<int64_t>(tables_.size());
  Tensor mine = Tensor::empty({count}, DType::i64), counts = Tensor::empty({ranks * count}, DType::i64);
  for (int64_t t = 0; t < count; ++t) mine.data<int64_t>()[t] = static_cast<int64_t>(rows_[static_cast<size_t>(t)].rows.size());
  group_.all_gather(mine, counts)->wait();
  const int64_t* counted = counts.data<int64_t>();
  for (int64_t t = 0; t < count; ++t) {
    int64_t most = 0;
    for (int64_t r = 0; r < ranks; ++r) most = std::max(most, counted[r * count + t]);
    Rows& kept = rows_[static_cast<size_t>(t)];
    if (most == 0) continue;
    const size_t param = tables_[static_cast<size_t>(t)];
    const int64_t table_rows = params_[param].second.size(0), width = params_[param].second.numel() / table_rows;
    const size_t b = static_cast<size_t>(bucket_of_[param]);
    const optim::ElementRange block = block_of(b);  // a sharded bucket: only this rank's block is averaged
    float* averaged = averaged_block(b);             // from the block's first element
    auto add_row = [&](int64_t row, const float* v, float divisor) {
      const int64_t first = offset_of_[param] + row * width;
      for (int64_t e = std::max(first, block.begin); e < std::min(first + width, block.end); ++e)
        averaged[e - block.begin] += v[e - first] / divisor;
    };
    if (ranks * most > table_rows) {  // the ranks' rows outnumber the table's: reduce them as a dense table
      Tensor dense = Tensor::zeros({table_rows * width});
      for (size_t k = 0; k < kept.rows.size(); ++k)
        kernels::add_into(dense.data<float>() + kept.rows[k] * width, kept.values.data() + k * width, width);
      reduced_bytes_ += static_cast<int64_t>(dense.nbytes());
      group_.all_reduce(dense, {.op = comm::ReduceOp::avg})->wait();
      for (int64_t row = 0; row < table_rows; ++row) add_row(row, dense.data<float>() + row * width, 1.0f);
    } else {
      Tensor ids = Tensor::zeros({most}, DType::i64), values = Tensor::zeros({most * width});
      std::copy(kept.rows.begin(), kept.rows.end(), ids.data<int64_t>());
      std::copy(kept.values.begin(), kept.values.end(), values.data<float>());
      reduced_bytes_ += static_cast<int64_t>(ids.nbytes() + values.nbytes());
      Tensor all_ids = Tensor::empty({ranks * most}, DType::i64), all_values = Tensor::empty({ranks * most * width});
      comm::WorkPtr gathering = group_.all_gather(ids, all_ids);
      group_.all_gather(values, all_values)->wait();
      gathering->wait();
      for (int64_t r = 0; r < ranks; ++r)
        for (int64_t k = 0; k < counted[r * count + t]; ++k)
          add_row(all_ids.data<int64_t>()[r * most + k], all_values.data<float>() + (r * most + k) * width,
                  static_cast<float>(ranks));
    }
    kept.rows.clear();
    kept.values.clear();
    kept.index.clear();
  }
}

void DistributedDataParallel::shard(optim::Optimizer& opt) {
  if (!sharded()) return;
  // Ranges go by name; an optimizer over another model's tensors of the same
  // names took them and stepped tensors nobody trained.
  std::map<std::string, const autograd::VariableImpl*> wrapped;
  for (const auto& [name, v] : params_) wrapped[name] = v.impl();
  for (const optim::ParamGroup& g : opt.param_groups())
    for (const auto& [name, v] : g.params) {
      const auto it = wrapped.find(name);
      ARTEL_CHECK(it == wrapped.end() || it->second == v.impl(), "DistributedDataParallel::shard: the optimizer's '",
                  name, "' is another tensor than the one wrapped under that name",
                  " (hint: build the optimizer over the parameters given to DistributedDataParallel)");
    }
  std::map<std::string, optim::ElementRange> owned;
  std::map<std::string, Tensor> grads;  // staged buckets: the gradient blocks (Note [Sharded gradients])
  for (size_t i = 0; i < params_.size(); ++i) {
    const size_t b = static_cast<size_t>(bucket_of_[i]);
    const optim::ElementRange block = block_of(b);
    const int64_t off = offset_of_[i], n = params_[i].second.numel();
    const int64_t begin = std::clamp(block.begin - off, int64_t{0}, n);
    const optim::ElementRange r{begin, std::clamp(block.end - off, begin, n)};
    owned[params_[i].first] = r;
    if (staged(b))
      grads[params_[i].first] = r.size() == 0 ? grad_blocks_[b].slice0(0, 0)
                                              : grad_blocks_[b].slice0(off + r.begin - block.begin, off + r.end - block.begin);
  }
  opt.shard(owned, {}, grads);
  // Stepped directly, the optimizer updated only this rank's block and the
  // others' never arrived: the replicas drifted apart without a word.
  opt.set_step_check([stepping = stepping_] {
    ARTEL_CHECK(*stepping, "an optimizer sharded by DistributedDataParallel was stepped directly: the other ranks' "
                "updated blocks would never arrive (hint: call ddp.step(opt), which steps it and gathers them)");
  });
}

std::chrono::duration<double> DistributedDataParallel::step(optim::Optimizer& opt, float grad_scale) {
  // Without finish() the optimizer read this rank's own gradients while
  // their all-reduces could still be writing them: replicas drifted apart.
  ARTEL_CHECK(!backward_since_finish_, "DistributedDataParallel::step() after a backward that finish() has not "
              "averaged yet (hint: call ddp.finish() between backward and step)");
  // Note [Gathers while the optimizer steps]: sharded, the optimizer updates
  // bucket by bucket, and each bucket's updated block is all-gathered on the
  // progress thread while the next buckets update (other memory). GPT-2 124M
  // on 2 workers (16-core Emerald Rapids) spent 91 ms a step in its 13
  // gathers after a 67 ms sharded AdamW, one after the other; in the
  // optimizer's own order (every matrix, then every vector) no bucket was
  // done before the matrices all were. Smallest buckets first: the gathers
  // then start early and the largest update overlaps the others' gathers
  // (Johnson's rule for two stages). The order is the plan's, the same on
  // every rank, so every rank starts the gathers in the same order.
  auto gather = [&](size_t batch) {
    const size_t b = update_order_[batch];
    if (!sharded(b)) return;
    const optim::ElementRange block = block_of(b);
    work_[b] = group_.all_gather(weights_[b].slice0(block.begin, block.end), weights_[b]);
  };
  *stepping_ = true;
  try {
    if (sharded()) opt.step(grad_scale, update_batches_, gather);
    else opt.step(grad_scale);
  } catch (...) {
    *stepping_ = false;
    for (comm::WorkPtr& w : work_) {  // the gathers started before the failure: theirs is not the error to report
      if (!w) continue;
      try {
        w->wait();
      } catch (...) {
      }
      w.reset();
    }
    throw;
  }
  *stepping_ = false;
  if (!sharded()) return {};
  auto start = Clock::now();
  for (comm::WorkPtr& w : work_) {
    if (!w) continue;
    w->wait();
    w.reset();
  }
  return Clock::now() - start;
}

std::vector<optim::GradSpan> DistributedDataParallel::averaged_gradients(bool counting) const {
  std::vector<optim::GradSpan> spans;
  for (size_t b = 0; b < plan_.size(); ++b) {
    if (counting && sharded() && !sharded(b) && group_.rank() != 0) continue;  // the replicated bucket: counted once
    const optim::ElementRange block = block_of(b);
    for (size_t j = 0; j < plan_[b].params.size(); ++j) {
      const size_t i = static_cast<size_t>(plan_[b].params[j]);
      const int64_t off = plan_[b].offsets[j], n = params_[i].second.numel();
      const int64_t begin = std::clamp(block.begin - off, int64_t{0}, n), end = std::clamp(block.end - off, begin, n);
      if (end > begin) spans.push_back({params_[i].first, averaged_block(b) + (off + begin - block.begin), end - begin});
    }
  }
  return spans;
}

std::vector<DistributedDataParallel::PowerSgdState> DistributedDataParallel::powersgd_state() const {
  std::vector<PowerSgdState> out;
  for (size_t b = 0; b < plan_.size(); ++b) {
    if (!powersgd_[b]) continue;
    for (const PowerSgdBucket::Kept& k : powersgd_[b]->kept())
      for (size_t j = 0; j < plan_[b].params.size(); ++j)
        if (plan_[b].offsets[j] == k.offset)
          out.push_back({params_[static_cast<size_t>(plan_[b].params[j])].first, k.q, k.error});
  }
  return out;
}

int64_t DistributedDataParallel::powersgd_steps() const {
  for (const auto& ps : powersgd_)
    if (ps) return ps->steps();
  return 0;
}

void DistributedDataParallel::set_powersgd_steps(int64_t steps) {
  for (auto& ps : powersgd_)
    if (ps) ps->set_steps(steps);
}

float DistributedDataParallel::grad_norm() {
  std::function<double(double)> sum;
  if (sharded()) sum = [this](double sq) { return sum_over(group_, sq); };
  return optim::global_grad_norm(averaged_gradients(true), sum);
}

optim::OptimizerState DistributedDataParallel::gather_optimizer_state(const optim::Optimizer& opt) {
  optim::OptimizerState state = opt.state_dict();  // zeros outside this rank's elements
  if (!sharded()) return state;
  for (size_t b = 0; b < plan_.size(); ++b) {
    if (!sharded(b)) continue;  // stepped whole on every rank: current everywhere
    // Every rank has the same step counts, so all skip or all gather.
    const std::string& first = params_[static_cast<size_t>(plan_[b].params[0])].first;
    if (!state.count("step." + first)) continue;
    const optim::ElementRange block = block_of(b);
    for (const std::string& kind : opt.buffer_kinds()) {
      Tensor flat = registered_or_plain(group_, padded_[b]);
      for (size_t j = 0; j < plan_[b].params.size(); ++j) {
        const Tensor& t = state.at(kind + "." + params_[static_cast<size_t>(plan_[b].params[j])].first);
        std::memcpy(flat.data<float>() + plan_[b].offsets[j], t.raw(), t.nbytes());
      }
      group_.all_gather(flat.slice0(block.begin, block.end), flat)->wait();
      for (size_t j = 0; j < plan_[b].params.size(); ++j) {
        const std::string key = kind + "." + params_[static_cast<size_t>(plan_[b].params[j])].first;
        Tensor whole = Tensor::empty(state.at(key).shape());  // not the optimizer's own memory
        std::memcpy(whole.raw(), flat.data<float>() + plan_[b].offsets[j], whole.nbytes());
        state[key] = whole;
      }
    }
  }
  return state;
}

}  // namespace artel::parallel
