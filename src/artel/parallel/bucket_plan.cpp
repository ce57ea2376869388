#include "artel/parallel/bucket_plan.h"

#include "artel/core/error.h"

namespace artel::parallel {

std::vector<Bucket> plan_buckets(const std::vector<int64_t>& param_numels, const BucketOptions& opts) {
  ARTEL_CHECK(opts.first_bucket_bytes > 0 && opts.bucket_bytes > 0, "bucket sizes must be positive, got ",
              opts.first_bucket_bytes, " and ", opts.bucket_bytes);
  std::vector<Bucket> buckets;
  Bucket current;
  for (int i = static_cast<int>(param_numels.size()) - 1; i >= 0; --i) {
    current.params.push_back(i);
    current.offsets.push_back(current.numel);
    current.numel += param_numels[static_cast<size_t>(i)];
    // c10d's rule: a bucket closes once it holds its limit or more, the
    // parameter that crossed the limit included.
    if (current.numel * 4 >= (buckets.empty() ? opts.first_bucket_bytes : opts.bucket_bytes)) {
      buckets.push_back(std::move(current));
      current = Bucket{};
    }
  }
  if (!current.params.empty()) buckets.push_back(std::move(current));
  return buckets;
}

}  // namespace artel::parallel
