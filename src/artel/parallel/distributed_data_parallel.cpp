#include "artel/parallel/distributed_data_parallel.h"

#include <cstdio>
#include <cstring>

namespace artel::parallel {
namespace {

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

}  // namespace

DistributedDataParallel::DistributedDataParallel(NamedParameters params, comm::ProcessGroup& group,
                                                 const DdpOptions& opts)
    : params_(std::move(params)), group_(group), opts_(opts) {
  std::vector<int64_t> numels;
  for (auto& [name, p] : params_) numels.push_back(p.numel());
  plan_ = plan_buckets(numels, opts_.buckets);
  bucket_of_.assign(params_.size(), -1);
  offset_of_.assign(params_.size(), 0);
  for (size_t b = 0; b < plan_.size(); ++b) {
    storage_.push_back(group_.alloc({plan_[b].numel}));
    for (size_t j = 0; j < plan_[b].params.size(); ++j) {
      bucket_of_[static_cast<size_t>(plan_[b].params[j])] = static_cast<int>(b);
      offset_of_[static_cast<size_t>(plan_[b].params[j])] = plan_[b].offsets[j];
    }
  }
  pending_.resize(plan_.size());
  work_.resize(plan_.size());
  arrived_.assign(params_.size(), false);
  for (size_t b = 0; b < plan_.size(); ++b) pending_[b] = static_cast<int>(plan_[b].params.size());

  // Every replica starts from rank 0's weights: broadcast them bucket by bucket.
  for (size_t b = 0; b < plan_.size(); ++b) {
    float* flat = storage_[b].data<float>();
    for (size_t j = 0; j < plan_[b].params.size(); ++j) {
      const Tensor& v = params_[static_cast<size_t>(plan_[b].params[j])].second.value();
      std::memcpy(flat + plan_[b].offsets[j], v.raw(), v.nbytes());
    }
    group_.broadcast(storage_[b], {.root = 0})->wait();
    for (size_t j = 0; j < plan_[b].params.size(); ++j) {
      Tensor& v = params_[static_cast<size_t>(plan_[b].params[j])].second.value();
      std::memcpy(v.raw(), flat + plan_[b].offsets[j], v.nbytes());
    }
  }

  for (size_t i = 0; i < params_.size(); ++i) {
    int index = static_cast<int>(i);
    params_[i].second.add_grad_ready_hook([this, index](autograd::Variable&) { on_grad_ready(index); });
    params_[i].second.set_grad_destination(slice_of(i));
  }
}

DistributedDataParallel::~DistributedDataParallel() {
  for (auto& [name, p] : params_) p.set_grad_destination(Tensor());
}

std::string DistributedDataParallel::describe() const {
  std::string s = std::to_string(plan_.size()) + " all-reduce bucket" + (plan_.size() == 1 ? "" : "s") + ":";
  for (size_t b = 0; b < plan_.size(); ++b) s += (b ? ", " : " ") + kib_or_mib(plan_[b].numel * 4);
  return s;
}

Tensor DistributedDataParallel::slice_of(size_t param) const {
  const autograd::Variable& p = params_[param].second;
  const int64_t off = offset_of_[param];
  return storage_[static_cast<size_t>(bucket_of_[param])].slice0(off, off + p.numel()).view(p.shape());
}

void DistributedDataParallel::on_grad_ready(int param) {
  if (!sync_) return;
  size_t i = static_cast<size_t>(param);
  const Tensor& g = params_[i].second.grad();
  if (!g.defined()) return;  // no gradient reached it: finish() reports or zero-fills it
  int b = bucket_of_[i];
  float* slot = storage_[static_cast<size_t>(b)].data<float>() + offset_of_[i];
  if (g.raw() != slot) std::memcpy(slot, g.raw(), g.nbytes());  // else written in place by backward
  arrived_[i] = true;
  --pending_[static_cast<size_t>(b)];
  launch_ready_buckets();
}

void DistributedDataParallel::launch_ready_buckets() {
  while (next_launch_ < static_cast<int>(plan_.size()) && pending_[static_cast<size_t>(next_launch_)] == 0) {
    size_t b = static_cast<size_t>(next_launch_++);
    work_[b] = group_.all_reduce(storage_[b], {.op = comm::ReduceOp::avg});
  }
}

std::chrono::duration<double> DistributedDataParallel::finish() {
  auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < params_.size(); ++i) {
    if (arrived_[i]) continue;
    ARTEL_CHECK(opts_.allow_unused_parameters, "parameter '", params_[i].first,
                "' received no gradient in this step, so its all-reduce would never start",
                " (hint: make it take part in the loss, or allow unused parameters)");
    size_t b = static_cast<size_t>(bucket_of_[i]);
    std::memset(storage_[b].data<float>() + offset_of_[i], 0, params_[i].second.value().nbytes());
    arrived_[i] = true;
    --pending_[b];
  }
  launch_ready_buckets();
  for (size_t b = 0; b < plan_.size(); ++b) {
    work_[b]->wait();
    work_[b].reset();
    pending_[b] = static_cast<int>(plan_[b].params.size());
    for (size_t j = 0; j < plan_[b].params.size(); ++j) {
      size_t i = static_cast<size_t>(plan_[b].params[j]);
      autograd::Variable& p = params_[i].second;
      // The averaged gradient is read in place from the bucket (no copy back).
      p.set_grad(slice_of(i));
      arrived_[i] = false;
    }
  }
  next_launch_ = 0;
  return std::chrono::steady_clock::now() - start;
}

}  // namespace artel::parallel
