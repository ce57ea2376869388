#include "artel/train/resume_batch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "artel/core/error.h"

namespace artel::train {
namespace {

using ::testing::HasSubstr;

std::string refusal(int64_t global, const BatchLayout& run) {
  try {
    accum_to_keep_global_batch(global, run, "ck");
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

TEST(ResumeBatch, AccumulationKeepsTheCheckpointsGlobalBatch) {
  EXPECT_EQ(accum_to_keep_global_batch(8, {.replicas = 2, .batch_size = 4}, "ck"), 1);  // as written
  EXPECT_EQ(accum_to_keep_global_batch(8, {.replicas = 1, .batch_size = 4}, "ck"), 2);
  EXPECT_EQ(accum_to_keep_global_batch(8, {.replicas = 1, .batch_size = 1, .accum = 3}, "ck"), 8);
  EXPECT_EQ(accum_to_keep_global_batch(48, {.replicas = 4, .batch_size = 4, .accum = 2}, "ck"), 3);
  // --accum given: the user's global batch, whatever the checkpoint's.
  EXPECT_EQ(accum_to_keep_global_batch(8, {.replicas = 3, .batch_size = 5, .accum = 1, .accum_given = true}, "ck"), 1);
  EXPECT_EQ(accum_to_keep_global_batch(8, {.replicas = 2, .batch_size = 4, .mesh = true}, "ck"), 1);
}

TEST(ResumeBatch, ALayoutThatCannotHoldItIsRefusedWithTheValidChoices) {
  EXPECT_THAT(refusal(8, {.replicas = 2, .batch_size = 3}),
              HasSubstr("checkpoint ck was trained with a global batch of 8; --batch-size 3 with 2 workers gives 6 rows "
                        "per micro-step, and no --accum makes them 8 (hint: valid with 2 workers: --batch-size 4, "
                        "--batch-size 2 --accum 2, --batch-size 1 --accum 4; or pass --accum"));
  EXPECT_THAT(refusal(8, {.replicas = 3, .batch_size = 1}),
              HasSubstr("no batch size does with 3 workers; data-parallel degrees 1, 2, 4 or 8 can"));
  EXPECT_THAT(refusal(8, {.replicas = 2, .batch_size = 2, .mesh = true, .micro_batches = 2}),
              HasSubstr("--batch-size 2 with dp 2 gives 4 (hint: valid: --batch-size 4;"));
  EXPECT_THAT(refusal(6, {.replicas = 2, .batch_size = 2, .mesh = true, .micro_batches = 2}),
              HasSubstr("--batch-size 3 would, with --micro-batches dividing it"));
  EXPECT_EQ(refusal(8, {.replicas = 2, .batch_size = 3}).find('\n'), std::string::npos);
}

}  // namespace
}  // namespace artel::train
