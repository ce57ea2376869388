#include "artel/core/memory_limit.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include <vector>

#include "artel/core/error.h"
#include "artel/core/tensor.h"

namespace artel {
namespace {

constexpr int64_t kMiB = 1 << 20;

TEST(MemoryLimit, KeepsAHeadroomOfAThirtySecondBetween8And64MiB) {
  EXPECT_EQ(memory_headroom(100 * kMiB), 8 * kMiB);
  EXPECT_EQ(memory_headroom(1024 * kMiB), 32 * kMiB);
  EXPECT_EQ(memory_headroom(64 * 1024 * kMiB), 64 * kMiB);
}

TEST(MemoryLimit, ExceedsWhenResidentPlusTheAllocationIsOver) {
  const int64_t limit = 1024 * kMiB, usable = limit - memory_headroom(limit);
  EXPECT_FALSE(exceeds_memory_limit(100 * kMiB, 50 * kMiB, limit));
  EXPECT_FALSE(exceeds_memory_limit(100 * kMiB, usable - 100 * kMiB, limit));  // exactly at it fits
  EXPECT_TRUE(exceeds_memory_limit(100 * kMiB, usable - 100 * kMiB + 1, limit));
  EXPECT_TRUE(exceeds_memory_limit(usable + 1, 0, limit));
  EXPECT_TRUE(exceeds_memory_limit(2 * limit, 1, limit));
  EXPECT_FALSE(exceeds_memory_limit(int64_t{1} << 40, int64_t{1} << 40, 0)) << "0: no limit";
}

TEST(MemoryLimit, CountsResidentMemoryAndBackedSharedMemory) {
  int64_t r = resident_bytes();
  EXPECT_GT(r, 0);
  EXPECT_LT(r, int64_t{1} << 40);
  note_backed_shared_memory(int64_t{1} << 40);  // as comm does for a segment it creates
  EXPECT_GE(resident_bytes(), int64_t{1} << 40);
  note_backed_shared_memory(-(int64_t{1} << 40));
  EXPECT_LT(resident_bytes(), int64_t{1} << 40);
}

// Ranks that are threads of one process each set the hint as their Trainer
// starts: a plain string written by two threads at once was freed twice
// (ASan, which runs this test in CI, names it at once).
TEST(MemoryLimit, TheHintIsSafeToSetAndReadFromManyThreads) {
  const std::string before = out_of_memory_hint();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t] {
      const std::string mine = "hint of thread " + std::to_string(t) + std::string(64, 'x');  // not a short string
      for (int i = 0; i < 2000; ++i) {
        set_out_of_memory_hint(mine);
        EXPECT_EQ(out_of_memory_hint().rfind("hint of thread ", 0), 0u);
      }
    });
  for (std::thread& t : threads) t.join();
  set_out_of_memory_hint(before);
}

TEST(MemoryLimit, WithoutALimitNothingIsRefused) {
  if (std::getenv(kMemoryLimitVariable) != nullptr) GTEST_SKIP() << "run under a limit";
  EXPECT_EQ(memory_limit_bytes(), 0);
  EXPECT_NO_THROW(check_memory_limit(size_t{1} << 40));
  EXPECT_NO_THROW(check_memory_limit_at_start());
}

// The limit is read once per process, so each case runs in a fresh one: a
// death test in the "threadsafe" style re-runs this program up to the test.
// The child prints the error it got and exits 3; 0 when nothing was thrown.
template <class Body>
void run_under_limit(const char* limit, Body body) {
  ::setenv(kMemoryLimitVariable, limit, 1);
  try {
    body();
  } catch (const Error& e) {
    std::fprintf(stderr, "ERROR[%s]\n", e.what());
    std::fflush(stderr);
    std::_Exit(3);
  }
  std::_Exit(0);
}

class MemoryLimitProcess : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(MemoryLimitProcess, ATensorOverTheLimitIsTheOneLineError) {
  // 64 MiB more than a process of a few MiB may hold under 40 MiB.
  EXPECT_EXIT(run_under_limit("41943040", [] { Tensor::empty({16 << 20}); }), ::testing::ExitedWithCode(3),
              "ERROR\\[out of memory: allocating 64.00 MiB for a tensor with 0.00 MiB of tensors held, [0-9.]+ MiB resident of the "
              "40 MiB --memory-per-worker limit \\(hint: hold less per worker: --zero 3 .*--recompute full.*"
              "--batch-size.*more workers.*\\)\\]");
}

TEST_F(MemoryLimitProcess, ATensorUnderTheLimitIsAllocated) {
  EXPECT_EXIT(run_under_limit("1073741824", [] { Tensor::empty({16 << 20}); }), ::testing::ExitedWithCode(0), "");
}

TEST_F(MemoryLimitProcess, SmallAllocationsAreNotChecked) {
  EXPECT_EXIT(run_under_limit("10485760", [] { check_memory_limit(kMemoryCheckMinBytes - 1); }),
              ::testing::ExitedWithCode(0), "");
}

TEST_F(MemoryLimitProcess, MemoryFreedEarlierIsGivenBackFirst) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer keeps freed memory in quarantine; malloc_trim cannot give it back";
#endif
  // Allocate and touch 64 MiB in heap-sized tensors, free them (they stay
  // resident: the heap is never trimmed), then ask for 64 MiB again under a
  // limit that fits one copy, not two: the check gives the freed memory back first.
  EXPECT_EXIT(run_under_limit("134217728",
                              [] {
                                {
                                  std::vector<Tensor> small;
                                  for (int i = 0; i < 16; ++i) small.push_back(Tensor::zeros({1 << 20}));
                                }
                                Tensor::zeros({16 << 20});
                              }),
              ::testing::ExitedWithCode(0), "");
}

TEST_F(MemoryLimitProcess, KeptLargeBuffersAreGivenBackFirst) {
  // A freed 64 MiB tensor is kept for reuse (Note [Large buffers]); 64 MiB of
  // heap-sized tensors then fit under the limit only once it is given back.
  EXPECT_EXIT(run_under_limit("134217728",
                              [] {
                                { Tensor::zeros({16 << 20}); }
                                if (kept_large_buffer_bytes() != size_t{64} << 20) std::_Exit(1);
                                std::vector<Tensor> small;
                                for (int i = 0; i < 16; ++i) small.push_back(Tensor::zeros({1 << 20}));
                                if (kept_large_buffer_bytes() != 0) std::_Exit(2);
                              }),
              ::testing::ExitedWithCode(0), "");
}

TEST(MemoryLimit, FreedMemoryIsGivenBackOnRequest) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer keeps freed memory in quarantine; malloc_trim cannot give it back";
#endif
  // What a training run frees and keeps (a 64 MiB buffer, 64 MiB of heap) is
  // resident until the run says its steps are over (Trainer::run, before the save).
  { Tensor::zeros({16 << 20}); }
  {
    std::vector<Tensor> small;
    for (int i = 0; i < 16; ++i) small.push_back(Tensor::zeros({1 << 20}));
  }
  ASSERT_GE(kept_large_buffer_bytes(), size_t{64} << 20);
  const int64_t before = resident_bytes();
  release_freed_memory();
  EXPECT_EQ(kept_large_buffer_bytes(), 0u);
  EXPECT_LT(resident_bytes(), before - (int64_t{96} << 20)) << "the kept buffer and the heap's free pages go back";
}

TEST_F(MemoryLimitProcess, ALimitBelowWhatTheProcessHoldsIsRefusedAtStart) {
  EXPECT_EXIT(run_under_limit("10485760", [] { check_memory_limit_at_start(); }), ::testing::ExitedWithCode(3),
              "ERROR\\[the 10.00 MiB --memory-per-worker limit is too small for a worker, which holds [0-9.]+ MiB "
              "\\(its program and libraries\\) before it starts \\(hint: give each worker more: "
              "--memory-per-worker 1G, say\\)\\]");
}

TEST(MemoryLimit, AGenerousLimitIsNoProblemAtStart) {
  EXPECT_NO_THROW(check_memory_limit_at_start(int64_t{1} << 30));
  EXPECT_NO_THROW(check_memory_limit_at_start(0));
}

TEST_F(MemoryLimitProcess, NamesWhatIsAllocatedAndTheSharedMemoryItCreated) {
  EXPECT_EXIT(run_under_limit("41943040",
                              [] {
                                note_backed_shared_memory(20 << 20);
                                check_memory_limit(30 << 20, "a shared-memory segment for communication");
                              }),
              ::testing::ExitedWithCode(3),
              "ERROR\\[out of memory: allocating 30.00 MiB for a shared-memory segment for communication with "
              "0.00 MiB of tensors held, [0-9.]+ MiB resident \\(20.00 MiB of it shared memory for communication\\) "
              "of the 40 MiB --memory-per-worker limit");
}

TEST_F(MemoryLimitProcess, AMalformedLimitIsAnError) {
  EXPECT_EXIT(run_under_limit("3G", [] { memory_limit_bytes(); }), ::testing::ExitedWithCode(3),
              "ERROR\\[ARTEL_MEMORY_LIMIT='3G' is not a positive number of bytes \\(hint: the launcher sets it");
}

}  // namespace
}  // namespace artel
