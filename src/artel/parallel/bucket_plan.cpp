#include "artel/parallel/bucket_plan.h"

#include "artel/core/error.h"

namespace artel::parallel {

std::vector<Bucket> plan_buckets(const std::vector<int64_t>& param_numels, const BucketOptions& opts) {
  ARTEL_CHECK(opts.first_bucket_bytes > 0 && opts.bucket_bytes > 0, "bucket sizes must be positive, got ",
              opts.first_bucket_bytes, " and ", opts.bucket_bytes);
  std::vector<Bucket> buckets;
  Bucket current;
  for (int i = static_cast<int>(param_numels.size()) - 1; i >= 0; --i) {
    int64_t bytes = param_numels[static_cast<size_t>(i)] * 4;
    int64_t limit = buckets.empty() ? opts.first_bucket_bytes : opts.bucket_bytes;
    if (!current.params.empty() && (current.numel * 4 + bytes > limit)) {
      buckets.push_back(std::move(current));
      current = Bucket{};
    }
    current.params.push_back(i);
    current.offsets.push_back(current.numel);
    current.numel += param_numels[static_cast<size_t>(i)];
  }
  if (!current.params.empty()) buckets.push_back(std::move(current));
  return buckets;
}

}  // namespace artel::parallel
