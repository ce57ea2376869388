// The shm backend with real worker processes (forked from the test): the
// collective suite, segment hygiene (nothing left in /dev/shm after a job,
// after a killed worker, after a failed rendezvous), and job-id exclusivity.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <iostream>
#include <thread>

#include "artel/comm/segment_store.h"
#include "artel/core/memory_limit.h"
#include "collective_suite.h"

namespace artel::comm {
namespace {

using ::testing::HasSubstr;

std::string unique_job(const std::string& what) {
  static int n = 0;
  return "test-" + what + "-" + std::to_string(getpid()) + "-" + std::to_string(n++);
}

bool segment_exists(const std::string& job) { return std::filesystem::exists("/dev/shm/artel-" + job); }

GroupOptions shm_options(const std::string& job, int rank, int world) {
  GroupOptions o;
  o.backend = "shm";
  o.rank = rank;
  o.world_size = world;
  o.job_id = job;
  o.timeout = std::chrono::seconds(60);
  o.registered_bytes = 4 << 20;
  o.staging_bytes = 4096;
  return o;
}

// Forks n workers running child(rank) (its return value is the exit code; an
// exception prints and exits 1) and returns their exit codes (-signal if killed).
// `between(pids)` runs in the parent while they work.
std::vector<int> run_workers(int n, const std::function<int(int)>& child,
                             const std::function<void(const std::vector<pid_t>&)>& between = {}) {
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      int code = 1;
      try {
        code = child(r);
      } catch (const std::exception& e) {
        std::cerr << "worker " << r << ": " << e.what() << std::endl;
      }
      _exit(code);
    }
    pids.push_back(pid);
  }
  if (between) between(pids);
  std::vector<int> codes(n, -1000);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  int left = n;
  while (left > 0) {
    for (int r = 0; r < n; ++r) {
      int status;
      if (codes[r] != -1000 || waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      --left;
    }
    if (left > 0 && std::chrono::steady_clock::now() > deadline) {
      for (pid_t p : pids) kill(p, SIGKILL);
      ADD_FAILURE() << "workers did not finish in time";
    }
    if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // reaping, not synchronising
  }
  return codes;
}

class ShmSuite : public ::testing::TestWithParam<int> {};

TEST_P(ShmSuite, CollectiveSuiteInWorkerProcesses) {
  const int n = GetParam();
  const std::string job = unique_job("suite");
  auto codes = run_workers(n, [&](int r) {
    auto pg = init_process_group(shm_options(job, r, n));
    testing::SuiteOptions so;
    so.sizes_per_case = 2;
    testing::run_collective_suite(*pg, so);
    return 0;
  });
  EXPECT_EQ(codes, std::vector<int>(n, 0));
  EXPECT_FALSE(segment_exists(job));
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmSuite, ::testing::Values(2, 3, 4));

TEST(Shm, NoSegmentLeftAfterAKilledWorker) {
  const std::string job = unique_job("kill");
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  auto codes = run_workers(2, [&](int r) {
    auto pg = init_process_group(shm_options(job, r, 2));
    if (r == 1) {  // tell the parent we are in, then wait to be killed
      char c = 1;
      if (write(fds[1], &c, 1) != 1) return 3;
      pause();
      return 4;
    }
    Tensor t = Tensor::full({4}, 1.f);
    try {
      pg->all_reduce(t)->wait();
    } catch (const Error& e) {  // rank 1 died: an error naming it, long before the 60 s timeout
      return std::string(e.what()).find("rank 1 (pid") != std::string::npos ? 0 : 5;
    }
    return 6;
  }, [&](const std::vector<pid_t>& pids) {
    char c;
    ASSERT_EQ(read(fds[0], &c, 1), 1);
    kill(pids[1], SIGKILL);
  });
  close(fds[0]), close(fds[1]);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], -SIGKILL);
  EXPECT_FALSE(segment_exists(job));
}

TEST(Shm, NoSegmentLeftWhenAWorkerNeverComes) {
  const std::string job = unique_job("absent");
  GroupOptions o = shm_options(job, 0, 2);
  o.timeout = std::chrono::milliseconds(300);
  try {
    init_process_group(o);
    ADD_FAILURE() << "rendezvous without rank 1 succeeded";
  } catch (const TimeoutError& e) {
    EXPECT_THAT(e.what(), HasSubstr("rank(s) [1]"));
  }
  EXPECT_FALSE(segment_exists(job));
}

TEST(Shm, SecondJobWithTheSameIdIsRefusedNotJoined) {
  const std::string job = unique_job("twice");
  GroupOptions first = shm_options(job, 0, 2);
  first.timeout = std::chrono::seconds(20);
  std::shared_ptr<ProcessGroup> a0, a1;
  std::thread t0([&] { a0 = init_process_group(first); });  // job A's rank 0 waits for its rank 1
  while (!segment_exists(job)) std::this_thread::yield();
  GroupOptions second = shm_options(job, 0, 2);
  try {
    init_process_group(second);
    ADD_FAILURE() << "a second job joined the first";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("already exists: another job uses this job id"));
  }
  first.rank = 1;
  a1 = init_process_group(first);  // job A is intact and completes
  t0.join();
  Tensor x = Tensor::full({3}, 2.f), y = Tensor::full({3}, 5.f);
  auto w0 = a0->all_reduce(x), w1 = a1->all_reduce(y);
  w0->wait(), w1->wait();
  EXPECT_EQ(x.to_vector()[2], 7.f);
  EXPECT_FALSE(segment_exists(job));
}

TEST(Shm, SegmentThatCannotBeCreatedIsAClearError) {
  GroupOptions o = shm_options(unique_job("huge"), 0, 1);
  o.registered_bytes = size_t{1} << 50;  // a petabyte: fallocate fails with ENOSPC/EFBIG
  try {
    init_process_group(o);
    ADD_FAILURE() << "created a petabyte segment";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot create shared-memory segment"));
  }
  EXPECT_FALSE(segment_exists(o.job_id));
}

TEST(Shm, RegisteredMemoryIsInTheSegment) {
  const std::string job = unique_job("reg");
  auto codes = run_workers(2, [&](int r) {
    GroupOptions o = shm_options(job, r, 2);
    o.staging_bytes = 1 << 20;
    auto pg = init_process_group(o);
    Tensor t = pg->alloc({(1 << 19) + 5});  // 2 MiB: the two_shot path, in place
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i % 100 + r);
    pg->all_reduce(t, {ReduceOp::sum, "two_shot"})->wait();
    for (int64_t i = 0; i < t.numel(); ++i)
      if (t.data<float>()[i] != 2 * (i % 100) + 1) return 2;
    return 0;
  });
  EXPECT_EQ(codes, std::vector<int>(2, 0));
}

// Note [Registered memory is address space first] (segment_layout.h): the
// default arenas (8 GiB a rank) are mapped whole, which a worker under an
// address-space limit could not; there they shrink to fit, and refuse a
// tensor larger than what is left of them, which plain memory then holds.
TEST(Shm, AGroupUnderAnAddressSpaceLimitStartsAndReduces) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space, which an RLIMIT_AS cannot leave room for";
#endif
  const std::string job = unique_job("aslimit");
  auto codes = run_workers(2, [&](int r) {
    std::ifstream statm("/proc/self/statm");
    size_t pages = 0;
    statm >> pages;
    const rlimit limit{pages * 4096 + (size_t{1} << 30), RLIM_INFINITY};  // 1 GiB more than it maps now
    if (setrlimit(RLIMIT_AS, &limit) != 0) return 3;
    GroupOptions o = shm_options(job, r, 2);
    o.registered_bytes = GroupOptions{}.registered_bytes;
    auto pg = init_process_group(o);
    Tensor small = pg->alloc({1 << 20});  // 4 MiB: registered
    const auto over = static_cast<int64_t>(limit.rlim_cur / 8 / sizeof(float));  // more than both arenas together
    try {
      pg->alloc({over});
      return 4;
    } catch (const Error&) {
    }
    Tensor large = Tensor::zeros({over});
    for (Tensor* t : {&small, &large}) {
      for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] = static_cast<float>(i % 7 + r);
      pg->all_reduce(*t)->wait();
      for (int64_t i = 0; i < t->numel(); ++i)
        if (t->data<float>()[i] != 2 * (i % 7) + 1) return 2;
    }
    return 0;
  });
  EXPECT_EQ(codes, std::vector<int>(2, 0));
}

// Note [Each rank backs its own registered memory] (segment_store.h): a
// rank is charged the registered pages its alloc hands out, not its whole
// arena; rank 0 also the segment's head. Blocks freed and handed out again
// cost nothing more.
TEST(Shm, ARankBacksOnlyTheRegisteredMemoryItHandsOut) {
  const std::string job = unique_job("backed");
  auto codes = run_workers(2, [&](int r) {
    constexpr int64_t kMiB = 1 << 20;
    GroupOptions o = shm_options(job, r, 2);
    o.registered_bytes = 64 * kMiB;
    const int64_t before = backed_shared_memory_bytes();
    auto pg = init_process_group(o);
    const int64_t joined = backed_shared_memory_bytes() - before;
    if (r == 0 ? joined <= 0 || joined >= 8 * kMiB : joined != 0) return 2;  // the head is rank 0's
    std::optional<Tensor> a = pg->alloc({kMiB / 4});  // 1 MiB
    if (backed_shared_memory_bytes() - before - joined != kMiB) return 3;
    Tensor b = pg->alloc({kMiB / 4 + 1});  // 1 MiB and one float: whole pages
    if (backed_shared_memory_bytes() - before - joined != 2 * kMiB + 4096) return 4;
    a.reset();
    Tensor c = pg->alloc({kMiB / 8});  // in a's freed block
    if (backed_shared_memory_bytes() - before - joined != 2 * kMiB + 4096) return 5;
    c.fill(1.f), b.fill(1.f);
    pg->all_reduce(b)->wait();  // the peer reads this rank's pages: they are there
    return b.data<float>()[kMiB / 4] == 2.f ? 0 : 6;
  });
  EXPECT_EQ(codes, std::vector<int>(2, 0));
}

TEST(Shm, RemoveJobSegments) {
  const std::string job = unique_job("remove");
  auto seg = posix_segment_store()->create("/artel-" + job, 4096);
  EXPECT_TRUE(segment_exists(job));
  EXPECT_EQ(remove_job_segments(job), 1);
  EXPECT_FALSE(segment_exists(job));
}

}  // namespace
}  // namespace artel::comm
