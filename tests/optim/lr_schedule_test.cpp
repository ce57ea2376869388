#include "artel/optim/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>

#include "artel/core/error.h"

namespace artel::optim {
namespace {

TEST(LrSchedule, ConstantIsConstantAfterWarmup) {
  LrSchedule s{.lr = 1e-3f};
  s.validate();
  EXPECT_EQ(s.at(0), 1e-3f);
  EXPECT_EQ(s.at(123456), 1e-3f);
  s.warmup_steps = 4;  // nanoGPT's warmup: lr·(it+1)/(warmup+1)
  EXPECT_FLOAT_EQ(s.at(0), 1e-3f / 5);
  EXPECT_FLOAT_EQ(s.at(3), 4e-3f / 5);
  EXPECT_EQ(s.at(4), 1e-3f);
}

TEST(LrSchedule, CosineFollowsNanoGptGetLr) {
  LrSchedule s{.kind = LrSchedule::Kind::cosine, .lr = 6e-4f, .warmup_steps = 100, .decay_steps = 1100};
  s.validate();
  EXPECT_FLOAT_EQ(s.floor(), 6e-5f);  // min_lr = lr/10 by default
  EXPECT_FLOAT_EQ(s.at(0), 6e-4f / 101);
  EXPECT_FLOAT_EQ(s.at(49), 6e-4f * 50 / 101);
  EXPECT_FLOAT_EQ(s.at(100), 6e-4f);                        // decay ratio 0
  EXPECT_FLOAT_EQ(s.at(600), 6e-5f + 0.5f * (6e-4f - 6e-5f));  // ratio 1/2: halfway
  EXPECT_FLOAT_EQ(s.at(350), 6e-5f + 0.5f * (1 + std::cos(0.25f * 3.14159265f)) * (6e-4f - 6e-5f));
  EXPECT_FLOAT_EQ(s.at(1100), 6e-5f);
  EXPECT_FLOAT_EQ(s.at(5000), 6e-5f);
  for (int64_t k = 101; k <= 1100; ++k) EXPECT_LE(s.at(k), s.at(k - 1)) << k;  // monotone decay
  s.min_lr = 0.0f;
  EXPECT_FLOAT_EQ(s.at(1100), 0.0f);
}

TEST(LrSchedule, BadSettingsAreErrors) {
  EXPECT_THROW((LrSchedule{.lr = 0.0f}).validate(), Error);
  EXPECT_THROW((LrSchedule{.lr = 1.0f, .warmup_steps = -1}).validate(), Error);
  EXPECT_THROW((LrSchedule{.kind = LrSchedule::Kind::cosine, .lr = 1.0f, .warmup_steps = 10, .decay_steps = 10}).validate(),
               Error);
  EXPECT_THROW((LrSchedule{.kind = LrSchedule::Kind::cosine, .lr = 1.0f, .decay_steps = 10, .min_lr = 2.0f}).validate(),
               Error);
  EXPECT_THROW(LrSchedule{}.at(-1), Error);
  EXPECT_EQ(parse_lr_schedule_kind("cosine"), LrSchedule::Kind::cosine);
  EXPECT_THROW(parse_lr_schedule_kind("linear"), Error);
}

}  // namespace
}  // namespace artel::optim
