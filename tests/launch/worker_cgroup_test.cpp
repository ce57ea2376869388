// --memory-per-worker and --cpus-per-worker: each worker in its own cgroups,
// the clean out-of-memory error, the launcher's diagnosis of an OOM kill, the
// kernel holding a worker to its CPU share, and no cgroup left behind on any
// path. Tests that need a writable cgroup skip, saying why, where there is
// none (not root, no such controller).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "artel/core/error.h"
#include "artel/launch/cgroup_place.h"
#include "artel/launch/signal_relay.h"
#include "artel/launch/worker_cgroup.h"
#include "artel/launch/worker_process.h"
#include "launch/artel_process.h"

namespace artel::launch::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// Where this machine lets the tests make cgroups with a controller; the reason when not.
struct Cgroups {
  std::optional<CgroupParent> parent;
  std::string why_not;
};

Cgroups find_parent(const WorkerLimits& limits) {
  Cgroups c;
  try {
    c.parent = prepare_cgroup_parents(limits).front();
  } catch (const Error& e) {
    c.why_not = e.what();
  }
  return c;
}

const Cgroups& cgroups() {
  static const Cgroups c = find_parent({int64_t{64} << 20, std::nullopt});
  return c;
}

const Cgroups& cpu_cgroups() {
  static const Cgroups c = find_parent({std::nullopt, 0.5});
  return c;
}

#define REQUIRE_CGROUPS()                                                                     \
  do {                                                                                        \
    if (!cgroups().parent) GTEST_SKIP() << "no writable memory cgroup: " << cgroups().why_not; \
  } while (0)

#define REQUIRE_CPU_CGROUPS()                                                                          \
  do {                                                                                                 \
    if (!cpu_cgroups().parent) GTEST_SKIP() << "no writable cpu cgroup: " << cpu_cgroups().why_not; \
  } while (0)

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The cgroups a launcher with this pid made (artel-<pid>-*) that are still
// there, in the memory or the cpu hierarchy: in the launcher's own cgroup
// (the test's: it is our child) or the hierarchy's root.
std::vector<std::string> cgroups_left_by(pid_t launcher) {
  std::vector<std::string> left;
  std::string prefix = "artel-" + std::to_string(launcher) + "-";
  std::vector<fs::path> dirs;
  for (Controller c : {Controller::kMemory, Controller::kCpu}) {
    try {
      CgroupPlace place = find_cgroup(c);
      for (const fs::path& dir : {place.own, place.hierarchy})
        if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
    } catch (const Error&) {  // no such controller: nothing can be left there
    }
  }
  for (const fs::path& dir : dirs) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().filename().string().rfind(prefix, 0) == 0) left.push_back(e.path().string());
  }
  return left;
}

ArtelProcess::Result run_and_check_cleanup(ArtelProcess& p) {
  ArtelProcess::Result r = p.finish(std::chrono::seconds(120));
  EXPECT_THAT(cgroups_left_by(p.pid()), ::testing::IsEmpty()) << "stderr:\n" << r.err;
  return r;
}

ArtelProcess::Result launch_limited(const std::string& limit, const std::vector<std::string>& options,
                                    const std::string& script) {
  std::vector<std::string> args{"launch", "--memory-per-worker", limit};
  args.insert(args.end(), options.begin(), options.end());
  for (const char* a : {"--", "sh", "-c"}) args.emplace_back(a);
  args.push_back(script);
  ArtelProcess p(args);
  return run_and_check_cleanup(p);
}

// ---- one cgroup, in process ----

WorkerLimits memory_limit(int64_t bytes) { return {bytes, std::nullopt}; }

TEST(MemoryCgroup, IsMadeWithItsLimitAndRemoved) {
  REQUIRE_CGROUPS();
  const CgroupParent& parent = *cgroups().parent;
  WorkerCgroup cg = WorkerCgroup::create(parent, "artel-" + std::to_string(::getpid()) + "-test-made",
                                         memory_limit(100 << 20));
  ASSERT_TRUE(fs::is_directory(cg.path()));
  EXPECT_EQ(cg.path().parent_path(), parent.dir);
  std::string limit = read_file(cg.path() / (parent.version == 2 ? "memory.max" : "memory.limit_in_bytes"));
  EXPECT_EQ(std::stoll(limit), 100 << 20);
  EXPECT_GE(cg.join().procs_fd, 0);
  EXPECT_FALSE(cg.oom_killed());
  fs::path path = cg.path();
  EXPECT_EQ(cg.remove(), "");
  EXPECT_FALSE(fs::exists(path));
  EXPECT_EQ(cg.remove(), "") << "removing twice is harmless";
}

// A child that joins the cgroup, then allocates and touches `bytes`, and
// then exits or (then_wait) waits for a signal. Returns once it has joined.
pid_t child_in(const WorkerCgroup& cg, size_t bytes, bool then_wait) {
  int joined[2];
  if (::pipe(joined) != 0) std::abort();
  pid_t pid = ::fork();
  if (pid == 0) {
    std::string me = std::to_string(::getpid());
    if (::write(cg.join().procs_fd, me.data(), me.size()) != static_cast<ssize_t>(me.size())) ::_exit(2);
    (void)!::write(joined[1], "j", 1);
    if (bytes > 0) {
      char* p = static_cast<char*>(std::malloc(bytes));
      if (p != nullptr) std::memset(p, 1, bytes);
    }
    if (then_wait) ::pause();
    ::_exit(0);
  }
  ::close(joined[1]);
  char c = 0;
  EXPECT_EQ(::read(joined[0], &c, 1), 1) << "the child did not join its cgroup";
  ::close(joined[0]);
  return pid;
}

TEST(MemoryCgroup, RecordsTheKernelsOomKill) {
  REQUIRE_CGROUPS();
  WorkerCgroup cg = WorkerCgroup::create(*cgroups().parent, "artel-" + std::to_string(::getpid()) + "-test-oom",
                                         memory_limit(32 << 20));
  pid_t pid = child_in(cg, size_t{256} << 20, false);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  EXPECT_TRUE(cg.oom_killed());
  EXPECT_EQ(cg.remove(), "");
}

TEST(MemoryCgroup, RemovingKillsAProcessLeftInside) {
  REQUIRE_CGROUPS();
  WorkerCgroup cg = WorkerCgroup::create(*cgroups().parent, "artel-" + std::to_string(::getpid()) + "-test-left",
                                         memory_limit(64 << 20));
  pid_t pid = child_in(cg, 0, true);
  fs::path path = cg.path();
  EXPECT_EQ(cg.remove(), "");
  EXPECT_FALSE(fs::exists(path));
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

TEST(MemoryCgroup, AWorkerThatCannotJoinIsAnErrorLikeACommandThatCannotRun) {
  // /dev/full refuses every write, as cgroup.procs would a pid it cannot take.
  int full = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(full, 0);
  SignalRelay relay;
  try {
    WorkerProcess::spawn({"true"}, {}, relay, {},
                         {CgroupJoin{full, "/sys/fs/cgroup/memory/artel-x", no_cgroup_hint(Controller::kMemory)}});
    ADD_FAILURE() << "spawned";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot put a worker in its cgroup: writing its pid to "
                                    "/sys/fs/cgroup/memory/artel-x/cgroup.procs failed: No space left on device"));
    EXPECT_THAT(e.what(), HasSubstr("prlimit --as"));
  }
  ::close(full);
}

// ---- artel launch ----

TEST(MemoryPerWorker, EachWorkerRunsInItsOwnCgroupWithTheLimit) {
  REQUIRE_CGROUPS();
  // Each worker prints its memory cgroup (from /proc/self/cgroup), the limit
  // the kernel holds for it there, and the limit in its environment.
  const bool v2 = cgroups().parent->version == 2;
  const std::string line = v2 ? "s/^0:://p" : "s/^[0-9]*:[^:]*memory[^:]*://p";
  const std::string file = v2 ? "memory.max" : "memory.limit_in_bytes";
  const std::string script = "p=$(sed -n '" + line + "' /proc/self/cgroup); echo \"cg ${p##*/} limit $(cat " +
                             find_cgroup(Controller::kMemory).hierarchy.string() + "$p/" + file + ") env $ARTEL_MEMORY_LIMIT\"";
  ArtelProcess p({"launch", "-n", "2", "--memory-per-worker", "96M", "--", "sh", "-c", script});
  auto r = run_and_check_cleanup(p);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string stem = "artel-" + std::to_string(p.pid()) + "-0-w";
  EXPECT_THAT(r.out, HasSubstr("[0] cg " + stem + "0 limit 100663296 env 100663296\n"));
  EXPECT_THAT(r.out, HasSubstr("[1] cg " + stem + "1 limit 100663296 env 100663296\n"));
}

TEST(MemoryPerWorker, AWorkerOomKilledAtItsLimitIsNamedWithTheHint) {
  REQUIRE_CGROUPS();
  // Rank 1's shell holds 300 MB in a variable: the kernel kills it at 64 MiB.
  auto r = launch_limited("64M", {"-n", "2"},
                          "if [ $ARTEL_RANK = 1 ]; then x=$(head -c 300000000 /dev/zero | tr '\\0' a); "
                          "echo survived; fi; exec sleep 60");
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);
  EXPECT_THAT(r.out, Not(HasSubstr("survived")));
  EXPECT_THAT(r.err, HasSubstr("artel launch: worker 1 ran out of memory: the kernel killed it (SIGKILL) at its "
                               "--memory-per-worker limit of 64 MiB; stopping the other 1 worker (hint: hold less "
                               "per worker: --zero 3"));
  EXPECT_THAT(r.err, HasSubstr("--recompute full"));
  EXPECT_LT(r.seconds, 30.0);
}

TEST(MemoryPerWorker, NoCgroupIsLeftAfterFailuresAndRestarts) {
  REQUIRE_CGROUPS();
  auto r = launch_limited("64M", {"-n", "2", "--max-restarts", "2"}, "[ $ARTEL_RANK = 1 ] && exit 4; sleep 60");
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_THAT(r.err, HasSubstr("giving up after 2 restarts"));
  EXPECT_THAT(r.err, Not(HasSubstr("cannot remove")));
}

TEST(MemoryPerWorker, NoCgroupIsLeftAfterSigint) {
  REQUIRE_CGROUPS();
  ArtelProcess p({"launch", "-n", "2", "--memory-per-worker", "64M", "--", "sh", "-c", "echo ready; exec sleep 60"});
  ASSERT_TRUE(p.wait_for_stdout("ready", 2, std::chrono::seconds(60)));
  EXPECT_EQ(cgroups_left_by(p.pid()).size(), 2u) << "one cgroup per running worker";
  p.signal(SIGINT);
  auto r = run_and_check_cleanup(p);
  EXPECT_EQ(r.exit_code, 128 + SIGINT);
}

TEST(MemoryPerWorker, NoCgroupIsLeftWhenTheCommandCannotRun) {
  REQUIRE_CGROUPS();
  ArtelProcess p({"launch", "-n", "2", "--memory-per-worker", "64M", "--", "/nonexistent/artel-no-such-program"});
  auto r = run_and_check_cleanup(p);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot run '/nonexistent/artel-no-such-program'"));
}

TEST(MemoryPerWorker, WithoutWritableCgroupsItIsAnErrorBeforeAnyWorkerStarts) {
  // As an unprivileged user (nobody), when this test runs as root; as is otherwise.
  std::string as_nobody = ::geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
  if (!as_nobody.empty() && std::system("command -v setpriv >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "setpriv (util-linux) is missing";
  TempDir dir;
  fs::permissions(dir.str(), fs::perms::all);  // nobody writes the output here
  std::string cmd = "cd " + dir.str() + " && " + as_nobody + ARTEL_BINARY +
                    " launch -n 2 --memory-per-worker 64M -- sh -c 'echo started' >out 2>err";
  int status = std::system(cmd.c_str());
  std::string out = read_file(dir.file("out")), err = read_file(dir.file("err"));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) GTEST_SKIP() << "this user may make memory cgroups (delegated)";
  EXPECT_EQ(WEXITSTATUS(status), 1) << err;
  EXPECT_EQ(out, "") << "a worker started";
  ASSERT_EQ(lines_of(err).size(), 1u) << err;
  EXPECT_THAT(err, HasSubstr("artel launch: error: cannot limit each worker's memory: "));
  EXPECT_THAT(err, HasSubstr("prlimit --as"));
}

// `artel launch FLAG value` refuses each value with one line, exit status 1.
void expect_launch_refuses(const std::string& flag, std::initializer_list<const char*> values) {
  for (const char* bad : values) {
    auto r = ArtelProcess({"launch", "-n", "1", flag, bad, "--", "true"}).finish();
    EXPECT_EQ(r.exit_code, 1) << flag << " " << bad;
    EXPECT_EQ(lines_of(r.err).size(), 1u) << r.err;
    EXPECT_THAT(r.err, HasSubstr("artel launch: error: ")) << flag << " " << bad;
  }
}

TEST(MemoryPerWorker, BadSizesAreOneLineErrors) {
  expect_launch_refuses("--memory-per-worker", {"3GB", "lots", "0", "512k"});
  auto r = ArtelProcess({"train", "--model", "mlp", "--nproc", "2", "--memory-per-worker", "3GB"}).finish();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "artel train: error: '3GB' is not a memory size: 'GB' could mean 10^9 or 2^30 bytes; write G or "
                   "GiB (binary) (hint: write a number of bytes or one with a binary unit: 1500000000, 512M, 512MiB, "
                   "3G, 3GiB)\n");
}

// ---- --cpus-per-worker ----

// Shell text for the directory of the shell's own cgroup with controller c:
// the hierarchy's mount and the path /proc/self/cgroup gives it.
std::string own_cgroup_in_shell(Controller c) {
  CgroupPlace place = find_cgroup(c);
  const std::string line = place.version == 2 ? "$2 == \"\"" : std::string("$2 ~ /(^|,)") + controller_name(c) + "(,|$)/";
  return place.hierarchy.string() + "$(awk -F: '" + line + " {print $3}' /proc/self/cgroup)";
}

TEST(CpuQuota, IsAShareOfATenMillisecondPeriodAndNeverUnderTheKernelsMinimum) {
  EXPECT_EQ(cpu_quota(0.5).quota_us, 5'000);
  EXPECT_EQ(cpu_quota(0.5).period_us, 10'000);
  EXPECT_EQ(cpu_quota(2).quota_us, 20'000) << "two cores' worth: twice the period";
  EXPECT_EQ(cpu_quota(0.05).quota_us, 1'000) << "the period grows so that the quota stays at 1 ms";
  EXPECT_EQ(cpu_quota(0.05).period_us, 20'000);
  EXPECT_EQ(cpu_quota(0.01).period_us, 100'000);
}

TEST(CpuCgroup, IsMadeWithItsQuotaAndRemoved) {
  REQUIRE_CPU_CGROUPS();
  const CgroupParent& parent = *cpu_cgroups().parent;
  WorkerCgroup cg =
      WorkerCgroup::create(parent, "artel-" + std::to_string(::getpid()) + "-test-cpu", {std::nullopt, 0.25});
  if (parent.version == 2) {
    EXPECT_EQ(read_file(cg.path() / "cpu.max"), "2500 10000\n");
  } else {
    EXPECT_EQ(std::stoll(read_file(cg.path() / "cpu.cfs_quota_us")), 2'500);
    EXPECT_EQ(std::stoll(read_file(cg.path() / "cpu.cfs_period_us")), 10'000);
  }
  EXPECT_FALSE(cg.oom_killed()) << "a cpu cgroup has no memory to run out of";
  fs::path path = cg.path();
  EXPECT_EQ(cg.remove(), "");
  EXPECT_FALSE(fs::exists(path));
}

TEST(CpusPerWorker, EachWorkerRunsInItsOwnCgroupsWithTheQuotaAndTheMemoryLimit) {
  REQUIRE_CGROUPS();
  REQUIRE_CPU_CGROUPS();
  // Each worker prints the quota and period the kernel holds for its cpu
  // cgroup (found through /proc/self/cgroup), its memory limit, and what
  // its environment says.
  const bool v2 = cpu_cgroups().parent->version == 2;
  const std::string cpu_dir = own_cgroup_in_shell(Controller::kCpu), mem_dir = own_cgroup_in_shell(Controller::kMemory);
  const std::string quota = v2 ? "$(cat " + cpu_dir + "/cpu.max)"
                               : "$(cat " + cpu_dir + "/cpu.cfs_quota_us) $(cat " + cpu_dir + "/cpu.cfs_period_us)";
  const std::string memory = "$(cat " + mem_dir + (v2 ? "/memory.max)" : "/memory.limit_in_bytes)");
  const std::string script = "echo \"cpu " + quota + " memory " + memory +
                             " env $ARTEL_CPUS_PER_WORKER threads $ARTEL_NUM_THREADS\"";
  ArtelProcess p({"launch", "-n", "2", "--cpus-per-worker", "0.5", "--memory-per-worker", "96M", "--", "sh", "-c",
                  script});
  auto r = run_and_check_cleanup(p);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* rank : {"[0] ", "[1] "})
    EXPECT_THAT(r.out, HasSubstr(std::string(rank) + "cpu 5000 10000 memory 100663296 env 0.5 threads 1\n")) << r.out;
}

TEST(CpusPerWorker, TheKernelHoldsAWorkerToItsShare) {
  REQUIRE_CPU_CGROUPS();
  // A worker that keeps a core busy for a while, at a tenth of a core, is
  // throttled: its cgroup's cpu.stat counts the periods it was stopped in.
  const std::string cpu_dir = own_cgroup_in_shell(Controller::kCpu);
  const std::string script = "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; "
                             "echo \"throttled $(awk '$1 == \"nr_throttled\" {print $2}' " + cpu_dir + "/cpu.stat)\"";
  ArtelProcess p({"launch", "-n", "1", "--cpus-per-worker", "0.1", "--", "sh", "-c", script});
  auto r = run_and_check_cleanup(p);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(throttled (\d+))"))) << r.out;
  EXPECT_GT(std::stoll(m[1]), 0) << r.out;
}

TEST(CpusPerWorker, SharesOutsideWhatTheMachineHasAreOneLineErrors) {
  expect_launch_refuses("--cpus-per-worker", {"0", "-1", "100000", "half"});
  auto r = ArtelProcess({"train", "--model", "mlp", "--nproc", "2", "--cpus-per-worker", "0"}).finish();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("artel train: error: --cpus-per-worker must be in [0.01, "));
  EXPECT_EQ(lines_of(r.err).size(), 1u) << r.err;
}

// ---- artel train ----

// The out-of-memory lines of a run, stdout and stderr together.
std::vector<std::string> oom_lines(const ArtelProcess::Result& r) {
  std::vector<std::string> found;
  for (const auto& l : lines_of(r.out + r.err))
    if (l.find("out of memory") != std::string::npos) found.push_back(l);
  return found;
}

TEST(MemoryPerWorker, TrainingOverTheLimitStopsWithOneLineNamingTheWorker) {
  REQUIRE_CGROUPS();
  TempDir dir;
  // Batches of 8000 MNIST rows hold more than 130 MiB: 104 MiB of tensors
  // and the program's 66. (A rank backs only the shared memory it registers,
  // comm/segment_store.h, so the same batches weigh alike on every worker:
  // one worker, to say the line once.)
  ArtelProcess p({"train", "--model", "mlp", "--nproc", "1", "--steps", "3", "--batch-size", "8000",
                  "--memory-per-worker", "130M", "--out", dir.file("run")});
  auto r = run_and_check_cleanup(p);
  EXPECT_NE(r.exit_code, 0);
  std::vector<std::string> oom = oom_lines(r);
  ASSERT_EQ(oom.size(), 1u) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  const std::regex worker_line(R"(\[\d\] artel train: error: out of memory: allocating [0-9.]+ MiB.* with [0-9.]+ MiB )"
                               R"(of tensors held, [0-9.]+ MiB resident.* of the 130 MiB --memory-per-worker limit )"
                               R"(\(hint: hold less per worker: --zero 3 .*--recompute full .*--batch-size.*)"
                               R"(more workers.*\))");
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer keeps freed memory resident in its quarantine, outside
  // any tensor the check sees: the kernel may stop the worker first, and then
  // the launcher's line names it.
  const std::regex launcher_line(R"(artel launch: worker \d ran out of memory: the kernel killed it \(SIGKILL\) at )"
                                 R"(its --memory-per-worker limit of 130 MiB.*\(hint: hold less per worker: --zero 3.*)");
  EXPECT_TRUE(std::regex_match(oom[0], worker_line) || std::regex_match(oom[0], launcher_line)) << oom[0];
#else
  EXPECT_TRUE(std::regex_match(oom[0], worker_line)) << oom[0];
  EXPECT_THAT(r.err, Not(HasSubstr("SIGKILL"))) << "the worker stopped itself, before the kernel had to";
#endif
}

TEST(MemoryPerWorker, TrainingUnderGenerousLimitsSucceeds) {
  REQUIRE_CGROUPS();
  REQUIRE_CPU_CGROUPS();
  TempDir dir;
  ArtelProcess p({"train", "--model", "mlp", "--nproc", "2", "--steps", "3", "--batch-size", "100",
                  "--memory-per-worker", "1G", "--cpus-per-worker", "0.5", "--out", dir.file("run")});
  auto r = run_and_check_cleanup(p);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(oom_lines(r), ::testing::IsEmpty());
  EXPECT_TRUE(fs::exists(dir.file("run/final.safetensors")));
}

TEST(MemoryPerWorker, TrainingRefusesALimitNoWorkerCouldStartIn) {
  ArtelProcess p({"train", "--model", "mlp", "--nproc", "2", "--memory-per-worker", "2M"});
  auto r = p.finish(std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "") << "a worker started";
  ASSERT_EQ(lines_of(r.err).size(), 1u) << r.err;
  EXPECT_THAT(r.err, HasSubstr("artel train: error: the 2.00 MiB --memory-per-worker limit is too small for a worker"));
}

}  // namespace
}  // namespace artel::launch::testing
