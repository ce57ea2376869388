// StepThread: steps run in order, each only once posted, and a failed step's
// error reaches the waiter.
#include "artel/comm/step_thread.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

namespace artel::comm {
namespace {

TEST(StepThread, RunsEachPostedStepInOrderAfterItIsPosted) {
  std::vector<size_t> ran;
  std::atomic<size_t> ready{0};  // steps below this may run
  StepThread steps([&](size_t k) {
    EXPECT_LT(k, ready.load()) << "step " << k << " ran before it was posted";
    ran.push_back(k);
  });
  for (size_t k = 0; k < 5; ++k) {
    ready = k + 1;
    steps.post(k);
    if (k >= 1) steps.wait(k - 1);
  }
  steps.wait(4);
  EXPECT_EQ(ran, (std::vector<size_t>{0, 1, 2, 3, 4}));
}

TEST(StepThread, AFailedStepsErrorIsRethrownToTheWaiterAndNoLaterStepRuns) {
  std::atomic<int> ran{0};
  StepThread steps([&](size_t k) {
    ++ran;
    if (k == 1) throw std::runtime_error("step 1 failed");
  });
  steps.post(0);
  steps.post(1);
  steps.post(2);
  steps.wait(0);
  EXPECT_THROW(
      {
        try {
          steps.wait(2);
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "step 1 failed");
          throw;
        }
      },
      std::runtime_error);
  EXPECT_EQ(ran.load(), 2);
}

TEST(StepThread, DestroyedWithStepsUnpostedItRunsNoneOfThem) {
  std::atomic<int> ran{0};
  {
    StepThread steps([&](size_t) { ++ran; });
    steps.post(0);
    steps.wait(0);
  }  // step 1 never posted: the destructor must not wait for it
  EXPECT_EQ(ran.load(), 1);
}

}  // namespace
}  // namespace artel::comm
