#include "artel/data/sampler.h"

#include <utility>

#include "artel/core/error.h"
#include "artel/core/rng.h"

namespace artel::data {

Order parse_order(const std::string& name) {
  if (name == "shuffle") return Order::shuffle;
  if (name == "sequential") return Order::sequential;
  throw Error("unknown batch order '" + name + "'", "use 'shuffle' or 'sequential'");
}

const char* order_name(Order o) { return o == Order::shuffle ? "shuffle" : "sequential"; }

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, uint64_t epoch) {
  ARTEL_CHECK(n >= 0, "epoch_permutation: negative item count ", n);
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[i] = i;
  Rng rng(seed, epoch);
  for (int64_t i = n - 1; i >= 1; --i)
    std::swap(perm[i], perm[static_cast<int64_t>(rng.below(static_cast<uint64_t>(i) + 1))]);
  return perm;
}

DistributedSampler::DistributedSampler(int64_t num_items, SamplerConfig cfg) : n_(num_items), cfg_(cfg) {
  ARTEL_CHECK(cfg_.rank_batch >= 1, "per-rank batch size must be >= 1, got ", cfg_.rank_batch);
  ARTEL_CHECK(cfg_.world_size >= 1, "world size must be >= 1, got ", cfg_.world_size);
  ARTEL_CHECK(cfg_.rank >= 0 && cfg_.rank < cfg_.world_size, "rank ", cfg_.rank, " is outside a world of size ",
              cfg_.world_size);
  // The product of two huge counts overflowed (std::length_error from a vector of it).
  int64_t global = 0;
  const bool overflows = __builtin_mul_overflow(cfg_.rank_batch, cfg_.world_size, &global);
  ARTEL_CHECK(!overflows && global <= n_, "the global batch of ", overflows ? std::string("more than 2^63") : std::to_string(global),
              " rows (", cfg_.world_size, " ranks x ", cfg_.rank_batch, ") is larger than the ", n_,
              " items of the train split (hint: lower the batch size or the number of workers)");
}

std::shared_ptr<const std::vector<int64_t>> DistributedSampler::permutation(int64_t epoch) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (epoch == cached_epoch_) return cached_perm_;
  }
  // Drawn outside the lock; two threads may both draw it, with the same result.
  auto perm = std::make_shared<const std::vector<int64_t>>(
      epoch_permutation(n_, cfg_.seed, static_cast<uint64_t>(epoch)));
  std::lock_guard<std::mutex> lock(mu_);
  cached_epoch_ = epoch, cached_perm_ = perm;
  return perm;
}

std::vector<int64_t> DistributedSampler::draws_from(int64_t k, int64_t first_row, int64_t count) const {
  ARTEL_CHECK(k >= 0, "global batch index must be >= 0, got ", k);
  const int64_t G = global_batch();
  int64_t first = 0;  // global row j of this rank's first draw: row_offset + k * G + first_row
  ARTEL_CHECK(!__builtin_mul_overflow(k, G, &first) && !__builtin_add_overflow(first, cfg_.row_offset, &first) &&
                  !__builtin_add_overflow(first, first_row, &first),
              "global batch ", k, " of ", G, " rows with row offset ", cfg_.row_offset,
              " lies beyond any run's rows (past 2^63)");
  ARTEL_CHECK(first >= 0, "global batch ", k, " with row offset ", cfg_.row_offset, " starts before row 0");
  std::vector<int64_t> out(static_cast<size_t>(count));
  if (cfg_.order == Order::sequential) {
    for (int64_t i = 0; i < count; ++i) out[i] = first + i;
    return out;
  }
  const int64_t rows_per_epoch = steps_per_epoch() * G;
  std::shared_ptr<const std::vector<int64_t>> perm;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t j = first + i;
    if (i == 0 || j % rows_per_epoch == 0) perm = permutation(j / rows_per_epoch);  // a batch may cross an epoch (O != 0)
    out[i] = (*perm)[j % rows_per_epoch];
  }
  return out;
}

std::vector<int64_t> DistributedSampler::draws(int64_t k) const {
  return draws_from(k, cfg_.rank * cfg_.rank_batch, cfg_.rank_batch);
}

std::vector<int64_t> DistributedSampler::global_draws(int64_t k) const { return draws_from(k, 0, global_batch()); }

}  // namespace artel::data
