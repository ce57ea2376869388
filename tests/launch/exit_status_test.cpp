#include "artel/launch/exit_status.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace artel::launch {
namespace {

// A real wait status, from a child that ends the way `body` makes it.
template <class Body>
int status_of(Body body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    body();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(ExitStatus, NamesSignals) {
  EXPECT_EQ(signal_name(SIGKILL), "SIGKILL");
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(signal_name(SIGINT), "SIGINT");
  EXPECT_EQ(signal_name(1000), "signal 1000");
}

TEST(ExitStatus, DescribesAnExitCode) {
  int status = status_of([] { ::_exit(3); });
  EXPECT_FALSE(exited_cleanly(status));
  EXPECT_EQ(describe_exit(status), "exited with status 3");
  EXPECT_EQ(exit_code_of(status), 3);
}

TEST(ExitStatus, DescribesADeathBySignal) {
  int status = status_of([] { ::kill(::getpid(), SIGKILL); });
  EXPECT_FALSE(exited_cleanly(status));
  EXPECT_EQ(describe_exit(status), "was killed by signal SIGKILL (9) (also how the kernel's OOM killer stops a "
                                   "process over the memory or a cgroup's memory.max)");
  EXPECT_EQ(exit_code_of(status), 128 + 9);
}

TEST(ExitStatus, DescribesAnOomKillAtTheMemoryLimit) {
  int killed = status_of([] { ::kill(::getpid(), SIGKILL); });
  EXPECT_EQ(describe_out_of_memory(killed, 200LL << 20),
            "ran out of memory: the kernel killed it (SIGKILL) at its --memory-per-worker limit of 200 MiB");
  int exited = status_of([] { ::_exit(137); });  // a shell whose child the kernel killed
  EXPECT_EQ(describe_out_of_memory(exited, 3LL << 30),
            "exited with status 137 after the kernel killed a process of it for running out of memory at its "
            "--memory-per-worker limit of 3 GiB");
  EXPECT_EQ(exit_code_of(killed), 137);
}

TEST(ExitStatus, ZeroIsClean) {
  int status = status_of([] {});
  EXPECT_TRUE(exited_cleanly(status));
  EXPECT_EQ(exit_code_of(status), 0);
}

}  // namespace
}  // namespace artel::launch
