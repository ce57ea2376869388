// Batch order and the distributed sampler: which samples each rank reads at
// global step k, defined so that anyone can reproduce a run from (seed, k).
//
// Note [Batch order]
// A global batch holds G = W·B rows (W ranks, B rows per rank); global batch k
// holds global rows j = k·G … k·G+G−1 and rank r reads rows r·B … r·B+B−1 of
// it. The global order is defined without W, so any world size sees the same
// samples in the same global batches given the seed.
//
// A split has n "items" (MNIST: samples; text: the R = (n_train−1)/T
// non-overlapping blocks starting at i·T). An epoch is E = floor(n / G) global
// batches; the partial batch at an epoch's end is dropped (PyTorch's
// DataLoader(drop_last=True)), so every global batch is full.
//
//   shuffle:    perm_e = Fisher–Yates over [0, n) drawn from Rng(seed, stream = e):
//                 perm = [0, 1, …, n−1]; for i = n−1 down to 1:
//                   swap(perm[i], perm[rng.below(i + 1)])
//               batch k is in epoch e = k / E; its row i (0 ≤ i < G) reads item
//               perm_e[(k % E)·G + i]. Only the first E·G entries of a
//               permutation are read.
//   sequential: row j reads item j mod n (MNIST). Text defines its own
//               sequential rows: the T+1 tokens starting at (j·T) mod (n_train − T)
//               (see dataset.h).
//
// A row offset O (SamplerConfig::row_offset, 0 by default) shifts the rows:
// row i of global batch k is global row j = O + k·G + i, which reads, in
// epoch e = j / (E·G), item perm_e[j mod (E·G)] (shuffle) or draw j
// (sequential). With O = 0 that is the definition above. It lets a run go on
// with another global batch where an earlier one stopped (Megatron's
// consumed_samples): a run that resumes after C rows with a global batch G'
// from step s uses O = C − s·G', so its next batch starts at row C.
//
// The sampler returns *draws*: for shuffle the permuted item, for sequential
// the global row number j; the dataset turns a draw into data (dataset.h).
//
//   DistributedSampler s(8000, {.order = Order::shuffle, .seed = 1, .rank_batch = 32,
//                               .world_size = 4, .rank = 2});
//   std::vector<int64_t> mine = s.draws(k);  // 32 draws of global batch k
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace artel::data {

enum class Order { sequential, shuffle };

// "shuffle" or "sequential"; throws artel::Error otherwise.
Order parse_order(const std::string& name);
const char* order_name(Order o);

// The permutation of epoch `epoch` over [0, n), as defined above.
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, uint64_t epoch);

struct SamplerConfig {
  Order order = Order::shuffle;
  uint64_t seed = 0;
  int64_t rank_batch = 1;  // B, rows per rank per step, >= 1
  int64_t world_size = 1;  // W, >= 1; the global batch is G = W·B
  int64_t rank = 0;        // in [0, W)
  int64_t row_offset = 0;  // O: global batch k starts at global row O + k·G (may be negative; rows read are >= 0)
};

class DistributedSampler {
 public:
  // Throws artel::Error on a bad config, or when one global batch needs more
  // than the n items of the split.
  DistributedSampler(int64_t num_items, SamplerConfig cfg);

  const SamplerConfig& config() const { return cfg_; }
  int64_t num_items() const { return n_; }
  int64_t global_batch() const { return cfg_.rank_batch * cfg_.world_size; }
  // E = floor(n / G) >= 1: global batches per epoch.
  int64_t steps_per_epoch() const { return n_ / global_batch(); }
  int64_t epoch_of(int64_t k) const { return k / steps_per_epoch(); }

  // This rank's B draws of global batch k >= 0 (see Note [Batch order]). Pure
  // in k: the last epoch's permutation is cached, nothing else is kept.
  std::vector<int64_t> draws(int64_t k) const;
  // All G draws of global batch k, as rank 0 of a world of size 1 would see them.
  std::vector<int64_t> global_draws(int64_t k) const;

 private:
  std::vector<int64_t> draws_from(int64_t k, int64_t first_row, int64_t count) const;
  std::shared_ptr<const std::vector<int64_t>> permutation(int64_t epoch) const;

  int64_t n_;
  SamplerConfig cfg_;
  mutable std::mutex mu_;  // guards the cache: a prefetch thread may call draws()
  mutable int64_t cached_epoch_ = -1;
  mutable std::shared_ptr<const std::vector<int64_t>> cached_perm_;
};

}  // namespace artel::data
