#include "artel/core/threads.h"
#include "artel/core/error.h"

#include <cblas.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace artel {

TEST(Threads, ParallelForCoversEveryIndexOnce) {
  for (int t : {1, 2, 3}) {
    set_num_threads(t);
    for (int64_t n : {0, 1, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      parallel_for(n, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (auto& h : hits) EXPECT_EQ(h.load(), 1);
    }
  }
  set_num_threads(1);
}

// Jobs back to back, of varying chunk counts, with a worker left behind by
// each (the caller may take every chunk before a worker wakes): no chunk of
// one job may be run under another's function or bounds, and none twice.
TEST(Threads, BackToBackJobsNeverMixTheirChunks) {
  for (int t : {2, 4}) {
    set_num_threads(t);
    for (int job = 0; job < 20000; ++job) {
      const int64_t n = 1 + job % 7;
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      parallel_for(n, 1, [&, n](int64_t b, int64_t e) {
        ASSERT_TRUE(0 <= b && b < e && e <= n) << "job " << job << ": [" << b << ", " << e << ") of " << n;
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1) << "job " << job;
    }
  }
  set_num_threads(1);
}

// The caller runs the first chunk of every job, so ops that split their rows
// alike keep each row block on one core. Claimed first come, first served, a
// worker took it now and then: jobs here come after serial stretches of 0 to
// 100 µs, which find the workers spinning, settling into sleep, or asleep.
TEST(Threads, TheCallerRunsTheFirstChunk) {
  for (int t : {2, 3}) {
    set_num_threads(t);
    const std::thread::id caller = std::this_thread::get_id();
    for (int job = 0; job < 2000; ++job) {
      const auto serial_until = std::chrono::steady_clock::now() + std::chrono::microseconds(job % 101);
      while (std::chrono::steady_clock::now() < serial_until) {
      }
      std::atomic<bool> first_on_caller{false};
      parallel_for(2 * t, 1, [&](int64_t b, int64_t) {
        if (b == 0) first_on_caller = std::this_thread::get_id() == caller;
      });
      ASSERT_TRUE(first_on_caller.load()) << "job " << job << " at " << t << " threads";
    }
  }
  set_num_threads(1);
}

// A chunk that throws, on the caller's thread or a worker's, hands its error
// to the caller once every chunk has run, and the pool goes on working.
TEST(Threads, AChunksErrorReachesTheCaller) {
  set_num_threads(2);
  for (int64_t bad : {0, 1}) {
    std::atomic<int> ran{0};
    EXPECT_THROW(parallel_for(2, 1, [&](int64_t b, int64_t) {
                   ++ran;
                   if (b == bad) throw Error("chunk " + std::to_string(b) + " failed");
                 }),
                 Error);
    EXPECT_EQ(ran.load(), 2);
  }
  std::atomic<int64_t> total{0};
  parallel_for(1000, 1, [&](int64_t b, int64_t e) { total += e - b; });
  EXPECT_EQ(total.load(), 1000);
  set_num_threads(1);
}

TEST(Threads, ConcurrentCallersAndNestingRunInline) {
  set_num_threads(2);
  std::atomic<int64_t> total{0};
  auto work = [&] {
    for (int rep = 0; rep < 200; ++rep)
      parallel_for(64, 1, [&](int64_t b, int64_t e) {
        parallel_for(e - b, 1, [&](int64_t b2, int64_t e2) { total += e2 - b2; });
      });
  };
  std::thread a(work), b(work);
  a.join();
  b.join();
  EXPECT_EQ(total.load(), 2 * 200 * 64);
  set_num_threads(1);
}

// ctest runs each test in its own process, so here nothing has set a thread
// count yet: the pool's first use alone must keep OpenBLAS to one thread.
TEST(Threads, OpenBlasIsSingleThreadedBeforeAnySetting) {
  EXPECT_EQ(num_threads(), 1);
  EXPECT_EQ(openblas_get_num_threads(), 1);
}

TEST(Threads, RejectsZero) { EXPECT_THROW(set_num_threads(0), Error); }

}  // namespace artel
