// Which gradients travel together: DDP's bucket assignment, a pure function
// (after c10d's reducer).
//
// Gradients become ready during backward roughly in reverse registration
// order, so buckets are filled walking the parameters backwards. The first
// bucket is small, so the first all-reduce starts early and overlaps the rest
// of backward; later buckets are larger, so there are few of them and each is
// big enough to run near the backend's bandwidth. As in c10d, a bucket takes
// parameters until it holds its limit or more: the parameter that crosses the
// limit goes with it. (Closing before that parameter instead left W1's first
// bucket at 22 KiB, its 5,130-element output layer, and the other 2.5 MiB in
// one bucket that could start only when backward had ended.)
//
//   auto plan = plan_buckets({400, 100, 3000}, {.first_bucket_bytes = 1024, .bucket_bytes = 8192});
//   // plan[0].params == {2} (the last parameter: 12,000 bytes >= 1024), plan[1].params == {1, 0}
#pragma once

#include <cstdint>
#include <vector>

namespace artel::parallel {

struct BucketOptions {
  int64_t first_bucket_bytes = 1 << 20;  // PyTorch: 1 MiB
  int64_t bucket_bytes = 25 << 20;       // PyTorch: 25 MiB
};

struct Bucket {
  std::vector<int> params;        // parameter indices, in the order they are laid out
  std::vector<int64_t> offsets;   // element offset of each parameter in the bucket
  int64_t numel = 0;
};

// param_numels[i]: elements of parameter i (f32). Every parameter lands in
// exactly one bucket; a bucket exceeds its limit by at most its last parameter.
std::vector<Bucket> plan_buckets(const std::vector<int64_t>& param_numels, const BucketOptions& opts);

// Whether a tied embedding table of `numel` f32 elements is large enough for
// DDP to keep apart in a bucket of its own (Note [Tables apart] in
// distributed_data_parallel.cpp): a bucket's size or more. A smaller one
// would cost its own collectives every step to hide little.
inline bool table_kept_apart(double numel, const BucketOptions& opts) {
  return numel * 4 >= static_cast<double>(opts.bucket_bytes);
}

}  // namespace artel::parallel
