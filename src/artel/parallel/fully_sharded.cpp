#include "artel/parallel/fully_sharded.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include <zlib.h>

#include "artel/autograd/backward_hook.h"
#include "artel/comm/gather_strings.h"
#include "artel/kernels/accumulate.h"
#include "artel/parallel/group_buffers.h"
#include "artel/parallel/wrapped_parameters.h"
#include "artel/core/memory_stats.h"

namespace artel::parallel {

namespace {

using Clock = std::chrono::steady_clock;

std::string mib(int64_t bytes) {
  char s[32];
  std::snprintf(s, sizeof s, "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  return s;
}

// Every rank must start from the same weights, but each keeps only its block
// of a value it was handed whole: ranks handed different values (another
// seed, another file) trained a model of mixed pieces without a word. So
// each rank sums the bytes it was given (zlib's CRC-32, a parameter a line)
// and the ranks compare the sums before the first step (the check PyTorch's
// FSDP leaves to sync_module_states).
void check_whole_values_agree(comm::ProcessGroup& group, const std::vector<nn::DeclaredParameter>& declared,
                              const std::vector<uint32_t>& crc) {
  if (group.size() == 1) return;
  std::string mine;
  for (uint32_t c : crc) mine += std::to_string(c) + "\n";
  const std::vector<std::string> all = comm::all_gather_strings(
      group, mine, {.max_bytes = 64 << 20, .what = "sums of the whole values", .hint = "wrap the same model on every rank"});
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    size_t line = 0, k = 0;  // the first differing line is the first differing parameter
    while (all[r][k] == all[0][k]) line += all[0][k++] == '\n';
    throw Error(detail::concat("FullyShardedDataParallel: ranks were handed different values for parameter '",
                               declared[line].name, "': rank ", r, "'s differs from rank 0's"),
                "every rank must draw the weights from the same seed or read the same file");
  }
}

}  // namespace

// Note [Units]
// A unit's parameters live in one releasable Storage (core/tensor.h) of its
// padded length: the parameters' values are views of it, so the graph's
// saved tensors are too, and freeing the unit gives the bytes back while
// every view stays valid for the next gather — PyTorch's
// storage().resize_(0). The rank's block (`shard`) is what it keeps; the
// optimizer steps it in place (Optimizer::shard's values), so the next
// gather brings every rank's new weights. The state of a unit: sharded (no
// bytes), gathering (an all-gather in flight into fresh bytes), gathered.
struct FullyShardedDataParallel::Unit {
  std::vector<size_t> params;   // indices into params_, laid out in this order
  int64_t numel = 0, padded = 0;
  std::shared_ptr<Storage> whole;   // releasable; the parameters' values view it
  Tensor shard;                     // this rank's block of the weights
  Tensor grad_shard;                // this rank's block of the averaged gradients
  bool fresh = true;                // the next reduction starts grad_shard over (a new step)
  Tensor staging;                   // whole gradients while being reduce-scattered
  comm::WorkPtr gather, reduce;
  bool gathered = false;
  int pending = 0;                  // gradients still to arrive in this backward
};

// Note [Reused unit memory]
// Every step gathers each unit twice and stages its gradients once: large
// blocks of a few sizes, freed as soon as used. Left to malloc, a freed block
// is split for activations and the next gather grows the heap (a 48-layer
// GPT held 1.9 GiB more than its tensors). So gathers, and staging that does
// not fit in the group's registered memory, come from a BufferCache (core/
// tensor.h: mappings of their own, a few kept for the next unit of the same
// size). Gradients are written straight into the staging (their
// destinations, Note [Gradient destinations]) from the moment the unit's
// backward starts, so they need no memory of their own.

FullyShardedDataParallel::FullyShardedDataParallel(nn::Model& model, comm::ProcessGroup& group, FsdpOptions opts,
                                                   const WholeValue& whole)
    : model_(model), group_(group), opts_(opts) {
  // Before anything is drawn: a second wrapper re-cut the first one's shards.
  model.check_pieces_unhooked();
  const std::vector<nn::DeclaredParameter> declared = model.declared_parameters();
  std::vector<WrappedParameter> wrapped;
  for (const nn::DeclaredParameter& d : declared) wrapped.push_back({d.name, d.shape, d.param});
  check_wrapped_parameters("FullyShardedDataParallel", wrapped, group_);  // before anything is drawn or gathered
  const std::vector<nn::Piece>& pieces = model.plan().pieces;
  // Which piece uses each parameter: one -> that piece's unit; several or none -> the root.
  std::vector<int> user(declared.size(), -1);
  for (size_t i = 0; i < declared.size(); ++i)
    for (size_t p = 0; p < pieces.size(); ++p)
      for (const std::string& m : pieces[p].modules)
        if (nn::path_within(declared[i].name, m)) user[i] = user[i] == -1 || user[i] == static_cast<int>(p) ? static_cast<int>(p) : -2;
  unit_of_piece_.assign(pieces.size(), -1);
  unit_of_param_.assign(declared.size(), -1);
  for (size_t i = 0; i < declared.size(); ++i) {
    int& u = user[i] >= 0 ? unit_of_piece_[static_cast<size_t>(user[i])] : root_;
    if (u < 0) {
      u = static_cast<int>(units_.size());
      units_.push_back(std::make_unique<Unit>());
    }
    unit_of_param_[i] = u;
  }
  // Units in the order the forward meets them, the root first (gathered first, kept longest).
  offset_of_param_.assign(declared.size(), 0);
  const int64_t quantum = kBlockAlign * group_.size();
  for (size_t i = 0; i < declared.size(); ++i) {
    Unit& u = *units_[static_cast<size_t>(unit_of_param_[i])];
    offset_of_param_[i] = u.numel;
    u.params.push_back(i);
    u.numel += shape_numel(declared[i].shape);
    params_.emplace_back(declared[i].name, declared[i].param);
  }
  arrived_.assign(params_.size(), false);
  int64_t largest = 0;
  for (auto& u : units_) {
    u->padded = (u->numel + quantum - 1) / quantum * quantum;
    largest = std::max(largest, u->padded);
  }
  // Room for the gathers and stagings of a backward's moment: two units of each.
  unit_cache_ = std::make_shared<BufferCache>(4 * static_cast<size_t>(largest) * sizeof(float));
  AllocationPurpose purpose("the ZeRO-3 shards of the weights and gradients");
  // Cut each unit: its whole values one unit at a time, this rank's block kept.
  std::vector<uint32_t> crc(declared.size());
  for (auto& up : units_) {
    Unit& u = *up;
    u.whole = Storage::releasable(static_cast<size_t>(u.padded) * sizeof(float), unit_cache_);
    u.whole->reacquire();
    std::memset(u.whole->data(), 0, u.whole->nbytes());
    for (size_t i : u.params) {
      const nn::DeclaredParameter& d = declared[i];
      Tensor value = Tensor::wrap(u.whole, d.shape, DType::f32, static_cast<size_t>(offset_of_param_[i]) * sizeof(float));
      const Tensor w = whole(d);
      ARTEL_CHECK(w.defined() && w.shape() == d.shape && w.dtype() == DType::f32, "FullyShardedDataParallel: the whole value of ",
                  d.name, " is ", w.defined() ? detail::concat(dtype_name(w.dtype()), " ", shape_str(w.shape())) : "missing",
                  ", the model declares float32 ", shape_str(d.shape), " (hint: the weights file or the draw must fit ",
                  "the model)");
      value.copy_from(w);
      crc[i] = static_cast<uint32_t>(crc32_z(0, static_cast<const Bytef*>(value.raw()), value.nbytes()));
      autograd::Variable p = d.param;
      p.value() = value;
    }
    u.shard = Tensor::empty({u.padded / group_.size()});
    std::memcpy(u.shard.raw(), u.whole->data() + group_.rank() * u.shard.nbytes(), u.shard.nbytes());
    u.whole->release();
    u.grad_shard = Tensor::zeros({u.shard.numel()});
    shard_bytes_ += static_cast<int64_t>(u.shard.nbytes());
  }
  check_whole_values_agree(group_, declared, crc);
  for (size_t i = 0; i < params_.size(); ++i)
    hooks_.push_back(params_[i].second.add_grad_ready_hook([this, i](autograd::Variable&) { on_grad_ready(i); }));
  link_ = std::make_shared<nn::PieceHooksLink>(nn::PieceHooksLink{this, "FullyShardedDataParallel"});
  model_.set_piece_hooks(link_);
}

// The model is not touched here: its owner (a Trainer) may already have
// destroyed it. It must not run forward after this is gone. A collective
// still in flight is waited for; one that failed (a peer timed out: the
// error that unwound the run is being reported) must not throw again from a
// destructor, which would end the worker in std::terminate.
FullyShardedDataParallel::~FullyShardedDataParallel() {
  for (auto& u : units_) {
    for (const comm::WorkPtr& w : {u->gather, u->reduce}) {
      if (!w) continue;
      try {
        w->wait();
      } catch (const std::exception&) {
      }
    }
  }
  for (auto& [name, p] : params_) p.set_grad_destination(Tensor());  // the staging goes back to the group
  for (size_t i = 0; i < hooks_.size(); ++i) params_[i].second.remove_grad_ready_hook(hooks_[i]);  // they point at this
  link_->hooks = nullptr;  // the model (if it is still there) and any graph it recorded no longer reach this
}

std::string FullyShardedDataParallel::describe() const {
  int64_t largest = 0;
  for (const auto& u : units_) largest = std::max(largest, u->padded * 4);
  return std::to_string(units_.size()) + " units (largest " + mib(largest) + ", " + mib(shard_bytes_) +
         " of weights held) sharded over " + std::to_string(group_.size()) + " ranks; weights gathered per " +
         (opts_.reshard_after_forward ? "forward and per backward" : "step (kept from forward to backward)") +
         ", gradients reduce-scattered";
}

void FullyShardedDataParallel::gather_async(int unit) {
  if (unit < 0) return;
  Unit& u = *units_[static_cast<size_t>(unit)];
  if (u.gathered || u.gather) return;
  AllocationPurpose purpose("a ZeRO-3 unit's gathered weights");
  u.whole->reacquire();
  gathered_bytes_ += static_cast<int64_t>(u.whole->nbytes());
  peak_gathered_bytes_ = std::max(peak_gathered_bytes_, gathered_bytes_);
  u.gather = group_.all_gather(u.shard, Tensor::wrap(u.whole, {u.padded}, DType::f32));
}

void FullyShardedDataParallel::wait_gathered(int unit) {
  if (unit < 0) return;
  Unit& u = *units_[static_cast<size_t>(unit)];
  if (u.gathered) return;
  gather_async(unit);
  u.gather->wait();
  u.gather.reset();
  u.gathered = true;
}

void FullyShardedDataParallel::reshard(int unit) {
  Unit& u = *units_[static_cast<size_t>(unit)];
  if (u.gather) wait_gathered(unit);  // its bytes are being written
  if (!u.gathered) return;
  u.whole->release();
  u.gathered = false;
  gathered_bytes_ -= static_cast<int64_t>(u.whole->nbytes());
}

// The nearest unit the forward meets after / the backward before `piece`.
int FullyShardedDataParallel::unit_after(size_t piece) const {
  for (size_t p = piece + 1; p < unit_of_piece_.size(); ++p)
    if (unit_of_piece_[p] >= 0) return unit_of_piece_[p];
  return -1;
}

int FullyShardedDataParallel::unit_before(size_t piece) const {
  for (size_t p = piece; p-- > 0;)
    if (unit_of_piece_[p] >= 0) return unit_of_piece_[p];
  return -1;
}

void FullyShardedDataParallel::before_forward(size_t piece) {
  wait_gathered(root_);
  wait_gathered(unit_of_piece_[piece]);
  gather_async(unit_after(piece));  // overlaps this piece's compute
}

nn::Activations FullyShardedDataParallel::after_forward(size_t piece, nn::Activations out) {
  const int unit = unit_of_piece_[piece];
  const bool graph = autograd::grad_enabled();
  if (unit >= 0 && (!graph || opts_.reshard_after_forward)) reshard(unit);
  if (!graph) {
    if (piece + 1 == unit_of_piece_.size() && root_ >= 0) reshard(root_);  // a forward without backward ends
    return out;
  }
  if (unit >= 0)
    for (autograd::Variable& v : out)
      v = autograd::before_backward(v, [link = link_, piece] {  // the graph may outlive this FSDP
        ARTEL_CHECK(link->hooks, "backward through a forward that FullyShardedDataParallel ran, after it was "
                    "destroyed: the weights it gathers are gone (hint: finish the step before destroying it)");
        static_cast<FullyShardedDataParallel*>(link->hooks)->before_backward(piece);
      });
  return out;
}

void FullyShardedDataParallel::before_backward(size_t piece) {
  wait_gathered(root_);
  const int unit = unit_of_piece_[piece];
  wait_gathered(unit);
  gather_async(unit_before(piece));  // overlaps this piece's backward
  // The root is staged with the first piece's backward: a tied embedding's
  // gradient then lands in place from the head's product on. Staged when
  // final, it was a fresh tensor through the whole backward, then copied
  // (GPT-2: 147 MiB twice at backward's end).
  if (root_ >= 0) stage(root_);
  if (unit >= 0) stage(unit);
}

// The unit's staging memory, its parameters' gradients pointed into it
// (Note [Reused unit memory]).
void FullyShardedDataParallel::stage(int unit) {
  Unit& u = *units_[static_cast<size_t>(unit)];
  if (u.reduce) complete(unit);  // the previous micro-step's reduction of this unit
  if (u.staging.defined()) return;
  AllocationPurpose purpose("a ZeRO-3 unit's gradients");
  try {
    u.staging = group_.alloc({u.padded});
  } catch (const Error&) {  // the registered memory is taken: a mapping of the cache's
    auto bytes = Storage::releasable(static_cast<size_t>(u.padded) * sizeof(float), unit_cache_);
    bytes->reacquire();
    u.staging = Tensor::wrap(bytes, {u.padded}, DType::f32);
  }
  u.staging.slice0(u.numel, u.padded).zero();
  staging_bytes_ += static_cast<int64_t>(u.staging.nbytes());
  peak_staging_bytes_ = std::max(peak_staging_bytes_, staging_bytes_);
  // Every slot is written (a gradient, or zeros for an unused one); the padding stays zero.
  for (size_t i : u.params)
    if (!arrived_[i])
      params_[i].second.set_grad_destination(
          u.staging.slice0(offset_of_param_[i], offset_of_param_[i] + params_[i].second.numel())
              .view(params_[i].second.shape()));
}

float* FullyShardedDataParallel::staging_slot(size_t param) {
  stage(unit_of_param_[param]);
  return units_[static_cast<size_t>(unit_of_param_[param])]->staging.data<float>() + offset_of_param_[param];
}

void FullyShardedDataParallel::on_grad_ready(size_t param) {
  autograd::Variable& p = params_[param].second;
  if (!p.grad().defined()) return;  // no gradient reached it: finish() reports or zero-fills it
  float* slot = staging_slot(param);
  if (p.grad().raw() != slot) std::memcpy(slot, p.grad().raw(), p.grad().nbytes());  // else written in place
  p.zero_grad();  // only this rank's block of it is kept
  arrived_[param] = true;
  *unreduced_ = true;
  Unit& u = *units_[static_cast<size_t>(unit_of_param_[param])];
  if (++u.pending == static_cast<int>(u.params.size())) launch(unit_of_param_[param]);
}

// Every gradient of the unit is in: reduce-scatter them, and the weights are
// no longer needed by this backward.
void FullyShardedDataParallel::launch(int unit) {
  Unit& u = *units_[static_cast<size_t>(unit)];
  const int64_t n = u.shard.numel();
  // The next micro-step's gradients must not land in memory being reduced.
  for (size_t i : u.params) params_[i].second.set_grad_destination(Tensor());
  u.reduce = group_.reduce_scatter(u.staging, u.staging.slice0(group_.rank() * n, (group_.rank() + 1) * n),
                                   {.op = comm::ReduceOp::avg});
  u.pending = 0;
  in_flight_.push_back(unit);
  if (in_flight_.size() > kReducesInFlight) complete(in_flight_.front());
  reshard(unit);
}

void FullyShardedDataParallel::complete(int unit) {
  Unit& u = *units_[static_cast<size_t>(unit)];
  u.reduce->wait();
  u.reduce.reset();
  const int64_t n = u.shard.numel();
  const float* averaged = u.staging.data<float>() + group_.rank() * n;
  if (u.fresh) std::memcpy(u.grad_shard.raw(), averaged, u.grad_shard.nbytes());
  else kernels::add_into(u.grad_shard.data<float>(), averaged, n);
  u.fresh = false;
  staging_bytes_ -= static_cast<int64_t>(u.staging.nbytes());
  u.staging = Tensor();
  in_flight_.erase(std::find(in_flight_.begin(), in_flight_.end(), unit));
}

void FullyShardedDataParallel::complete_arrivals() {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (arrived_[i]) continue;
    ARTEL_CHECK(opts_.allow_unused_parameters, "parameter '", params_[i].first,
                "' received no gradient in this step, so its reduce-scatter would never start",
                " (hint: make it take part in the loss, or allow unused parameters)");
    std::memset(staging_slot(i), 0, static_cast<size_t>(params_[i].second.numel()) * sizeof(float));
    Unit& u = *units_[static_cast<size_t>(unit_of_param_[i])];
    if (++u.pending == static_cast<int>(u.params.size())) launch(unit_of_param_[i]);
  }
  arrived_.assign(params_.size(), false);
}

std::chrono::duration<double> FullyShardedDataParallel::finish() {
  // Without shard() an optimizer steps the gathered views, whose memory the
  // units give back after each piece: it stepped freed weights, silently.
  ARTEL_CHECK(sharded_, "FullyShardedDataParallel::finish() before shard(optimizer): the optimizer would step the "
              "gathered weights, which are freed after each piece (hint: call fsdp.shard(opt) once, before the first "
              "step)");
  const auto start = Clock::now();
  complete_arrivals();
  while (!in_flight_.empty()) complete(in_flight_.front());
  for (size_t u = 0; u < units_.size(); ++u) {
    reshard(static_cast<int>(u));
    units_[u]->fresh = true;  // the next step's first reduction starts the shard over
  }
  *unreduced_ = false;
  return Clock::now() - start;
}

Tensor FullyShardedDataParallel::owned_value(const std::string& name) const {
  const auto it = values_.find(name);
  ARTEL_CHECK(it != values_.end(), "FullyShardedDataParallel: no parameter '", name, "'",
              values_.empty() ? " (hint: shard(optimizer) makes the owned values)" : "");
  return it->second;
}

void FullyShardedDataParallel::shard(optim::Optimizer& opt) {
  sharded_ = true;
  std::map<std::string, optim::ElementRange> owned;
  std::map<std::string, Tensor> values, grads;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Unit& u = *units_[static_cast<size_t>(unit_of_param_[i])];
    const int64_t n = u.shard.numel(), first = group_.rank() * n;  // this rank's elements of the unit
    const int64_t off = offset_of_param_[i], numel = params_[i].second.numel();
    const int64_t begin = std::clamp(first - off, int64_t{0}, numel), end = std::clamp(first + n - off, begin, numel);
    const std::string& name = params_[i].first;
    owned[name] = {begin, end};
    const int64_t at = end > begin ? off + begin - first : 0;
    values[name] = u.shard.slice0(at, at + end - begin);
    grads[name] = u.grad_shard.slice0(at, at + end - begin);
  }
  opt.shard(owned, values, grads);
  // Without finish() the step read shards that reduce-scatters were still
  // writing (or had not begun): the ranks stepped apart, silently.
  opt.set_step_check([unreduced = unreduced_] {
    ARTEL_CHECK(!*unreduced, "optimizer step after a backward that FullyShardedDataParallel::finish() has not "
                "reduced yet (hint: call fsdp.finish() between backward and step)");
  });
  values_ = values;
}

float FullyShardedDataParallel::grad_norm() {
  std::vector<optim::GradSpan> spans;
  for (size_t i = 0; i < units_.size(); ++i)
    spans.push_back({"unit " + std::to_string(i), units_[i]->grad_shard.data<float>(), units_[i]->grad_shard.numel()});
  return optim::global_grad_norm(spans, [this](double sq) { return sum_over(group_, sq); });
}

void FullyShardedDataParallel::for_each_whole(const std::function<void(const std::string&, const Tensor&)>& visit) {
  for (size_t u = 0; u < units_.size(); ++u) {
    const bool was = units_[u]->gathered;
    wait_gathered(static_cast<int>(u));
    gather_async(static_cast<int>(u + 1 < units_.size() ? u + 1 : u));
    for (size_t i : units_[u]->params) visit(params_[i].first, params_[i].second.value());
    if (!was) reshard(static_cast<int>(u));
  }
}

}  // namespace artel::parallel
