// End to end: the real `artel launch` starting `sh -c` workers.
#include <signal.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "artel/core/threads.h"
#include "launch/artel_process.h"

namespace artel::launch::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

ArtelProcess::Result launch(std::vector<std::string> options, const std::string& script) {
  std::vector<std::string> args{"launch"};
  args.insert(args.end(), options.begin(), options.end());
  for (const char* a : {"--", "sh", "-c"}) args.emplace_back(a);
  args.push_back(script);
  return ArtelProcess(args).finish();
}

TEST(LaunchCommand, SetsTheEnvironmentOfEveryRank) {
  auto r = launch({"-n", "3", "--threads", "2"},
                  "echo \"R=$ARTEL_RANK W=$ARTEL_WORLD_SIZE L=$ARTEL_LOCAL_RANK T=$ARTEL_NUM_THREADS "
                  "C=$ARTEL_RESTART_COUNT J=$ARTEL_JOB_ID\"");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::regex line(R"(\[(\d)\] R=(\d) W=3 L=(\d) T=2 C=0 J=(\d+-0-[0-9a-f]{8}))");
  std::set<std::string> ranks, job_ids;
  for (const auto& l : lines_of(r.out)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(l, m, line)) << l;
    EXPECT_EQ(m[1], m[2]);  // the prefix names the worker's own rank
    EXPECT_EQ(m[2], m[3]);  // one host: local rank == rank
    ranks.insert(m[2]);
    job_ids.insert(m[4]);
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2"}));
  EXPECT_EQ(job_ids.size(), 1u) << "all workers of one attempt share the job id";
}

// `artel train --nproc 4` as a worker of `artel launch -n 2` ran as one of
// 2 workers, the 4 ignored without a word: refused, naming the launcher's flag.
TEST(LaunchCommand, AWorkerGivenNprocIsToldTheLauncherStartsTheWorkers) {
  auto r = launch({"-n", "2"}, std::string(ARTEL_BINARY) + " train --nproc 4 --steps 1 --out /nonexistent/run");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--nproc 4 given to a worker of `artel launch`, which starts the workers (hint: drop "
                               "--nproc and give the count to the launcher: artel launch -n 4)"));
}

TEST(LaunchCommand, DefaultThreadsSplitTheCores) {
  auto r = launch({"-n", "2"}, "echo T=$ARTEL_NUM_THREADS");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string t = "T=" + std::to_string(std::max(1, available_cores() / 2));
  EXPECT_EQ(lines_of(r.out).size(), 2u);
  for (const auto& l : lines_of(r.out)) EXPECT_THAT(l, HasSubstr(t));
}

// "0-2,5" (a /proc Cpus_allowed_list) -> {0, 1, 2, 5}.
std::vector<int> parse_cpu_list(const std::string& list) {
  std::vector<int> cpus;
  std::istringstream in(list);
  for (std::string range; std::getline(in, range, ',');) {
    int lo = 0, hi = 0;
    if (std::sscanf(range.c_str(), "%d-%d", &lo, &hi) != 2) hi = lo;
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  return cpus;
}

// Each worker's allowed cores, by rank, from what it read in /proc.
std::map<int, std::vector<int>> cores_of_workers(const std::vector<std::string>& options) {
  auto r = launch(options, "echo \"cpus $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)\"");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::map<int, std::vector<int>> cores;
  std::regex line(R"(\[(\d+)\] cpus ([0-9,-]+))");
  for (const auto& l : lines_of(r.out)) {
    std::smatch m;
    EXPECT_TRUE(std::regex_match(l, m, line)) << l;
    cores[std::stoi(m[1])] = parse_cpu_list(m[2]);
  }
  return cores;
}

TEST(LaunchCommand, BindsEachWorkerToItsOwnCoresWhenAskedAndTheyFit) {
  const std::vector<int> mine = allowed_cores();
  if (mine.size() < 2) GTEST_SKIP() << "binding two workers needs two cores";
  auto bound = cores_of_workers({"-n", "2", "--threads", "1", "--bind-to", "core"});
  EXPECT_EQ(bound, (std::map<int, std::vector<int>>{{0, {mine[0]}}, {1, {mine[1]}}}));
  auto unbound = cores_of_workers({"-n", "2", "--threads", "1"});
  EXPECT_EQ(unbound, (std::map<int, std::vector<int>>{{0, mine}, {1, mine}})) << "unbound unless asked";
  const std::string too_many = std::to_string(mine.size() + 1);
  auto oversubscribed = cores_of_workers({"-n", too_many, "--threads", "1", "--bind-to", "core"});
  ASSERT_EQ(oversubscribed.size(), mine.size() + 1);
  for (const auto& [rank, cores] : oversubscribed) EXPECT_EQ(cores, mine) << "rank " << rank;
}

TEST(LaunchCommand, PrefixesWholeLinesOfStdoutAndStderr) {
  // Three workers write 200 long lines each to stdout and to stderr at once.
  auto r = launch({"-n", "3"},
                  "i=0; while [ $i -lt 200 ]; do "
                  "echo \"out $ARTEL_RANK $i 0123456789012345678901234567890123456789012345678901234567890123\"; "
                  "echo \"err $ARTEL_RANK $i 0123456789012345678901234567890123456789012345678901234567890123\" >&2; "
                  "i=$((i+1)); done; printf \"tail $ARTEL_RANK\"");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (auto [text, kind] : {std::pair{r.out, "out"}, std::pair{r.err, "err"}}) {
    std::regex line(std::string(R"(\[(\d)\] )") + kind + R"( (\d) \d+ 0123456789012345678901234567890123456789012345678901234567890123)");
    std::map<std::string, int> per_rank;
    for (const auto& l : lines_of(text)) {
      std::smatch m;
      if (std::string(kind) == "out" && std::regex_match(l, m, std::regex(R"(\[(\d)\] tail (\d))"))) {
        EXPECT_EQ(m[1], m[2]) << "a partial last line is flushed with its own prefix";
        per_rank["tail" + m[1].str()]++;
        continue;
      }
      ASSERT_TRUE(std::regex_match(l, m, line)) << "a torn or unprefixed line: " << l;
      EXPECT_EQ(m[1], m[2]);
      per_rank[m[1]]++;
    }
    for (const char* rank : {"0", "1", "2"}) EXPECT_EQ(per_rank[rank], 200) << kind << " of rank " << rank;
    if (std::string(kind) == "out") {
      for (const char* tail : {"tail0", "tail1", "tail2"}) EXPECT_EQ(per_rank[tail], 1) << tail;
    }
  }
}

// A check every worker makes alike fails them all with one error: it is
// written once, with the prefix of the worker that said it first; so is a
// note. Errors that differ, and other lines, all get through. (The workers
// exit 0, so none is stopped before it has said all it has to.)
TEST(LaunchCommand, AnErrorEveryWorkerSaysIsWrittenOnce) {
  auto r = launch({"-n", "3"},
                  "echo 'artel train: error: n_embd (128) must be a multiple of n_head (3)' >&2; "
                  "echo \"artel train: error: rank $ARTEL_RANK has no peer\" >&2; "
                  "echo 'artel: note: /dev/shm is small' >&2; "
                  "echo 'warning: said by all' >&2");
  EXPECT_EQ(r.exit_code, 0);
  std::map<std::string, int> count;
  for (const auto& l : lines_of(r.err)) count[l.substr(l.find(' ') + 1)]++;
  EXPECT_EQ(count["artel train: error: n_embd (128) must be a multiple of n_head (3)"], 1) << r.err;
  for (const char* rank : {"0", "1", "2"})
    EXPECT_EQ(count[std::string("artel train: error: rank ") + rank + " has no peer"], 1) << r.err;
  EXPECT_EQ(count["artel: note: /dev/shm is small"], 1) << r.err;
  EXPECT_EQ(count["warning: said by all"], 3) << r.err;
}

TEST(LaunchCommand, AllZeroMeansZero) {
  auto r = launch({"-n", "4"}, "exit 0");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

TEST(LaunchCommand, AFailingWorkerStopsTheOthersAndPassesItsCodeOn) {
  auto r = launch({"-n", "4"}, "if [ $ARTEL_RANK = 2 ]; then exit 3; fi; sleep 60");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.err, HasSubstr("artel launch: worker 2 exited with status 3; stopping the other 3 workers\n"));
  EXPECT_LT(r.seconds, 15.0) << "the sleeping workers were not stopped";
  EXPECT_THAT(r.err, Not(HasSubstr("restarting")));
}

TEST(LaunchCommand, AWorkerKilledBySignalIsNamed) {
  auto r = launch({"-n", "3"}, "if [ $ARTEL_RANK = 1 ]; then kill -KILL $$; fi; sleep 60");
  EXPECT_EQ(r.exit_code, 128 + 9);
  EXPECT_THAT(r.err, HasSubstr("artel launch: worker 1 was killed by signal SIGKILL (9) (also how the kernel's OOM "
                               "killer stops a process over the memory or a cgroup's memory.max); stopping the other 2 workers"));
  EXPECT_LT(r.seconds, 15.0);
}

// A worker killed while its groups were forming leaves shared-memory
// segments no rank unlinks; the launcher removes the job's once all are gone,
// and nothing of another job's. Here the workers make the files themselves.
TEST(LaunchCommand, AFailedJobLeavesNoSharedMemoryBehind) {
  const std::string other = "/dev/shm/artel-launch-test-" + std::to_string(::getpid());
  ASSERT_EQ(std::system(("touch " + other).c_str()), 0);
  auto r = launch({"-n", "2"}, "touch /dev/shm/artel-$ARTEL_JOB_ID.g$ARTEL_RANK; echo $ARTEL_JOB_ID; "
                               "if [ $ARTEL_RANK = 1 ]; then kill -KILL $$; fi; sleep 60");
  EXPECT_EQ(r.exit_code, 128 + 9) << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(\] (\d+-0-[0-9a-f]{8}))"))) << r.out;
  for (const char* rank : {"0", "1"}) {
    struct stat st;
    EXPECT_NE(::stat(("/dev/shm/artel-" + m[1].str() + ".g" + rank).c_str(), &st), 0) << "rank " << rank;
  }
  struct stat st;
  EXPECT_EQ(::stat(other.c_str(), &st), 0) << "another job's segment was removed";
  std::remove(other.c_str());
}

TEST(LaunchCommand, AWorkerThatNeverStopsWritingCannotStallTheLauncher) {
  TempDir dir;
  std::string fifo = dir.file("flooding");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Rank 1 floods its stdout; rank 0 fails once the flood has begun.
  auto r = launch({"-n", "2"}, "if [ $ARTEL_RANK = 0 ]; then read x < " + fifo + "; exit 2; fi; "
                               "yes | { head -c 1000000; echo go > " + fifo + "; exec cat; }");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("artel launch: worker 0 exited with status 2; stopping the other 1 worker\n"));
  EXPECT_LT(r.seconds, 15.0);
}

TEST(LaunchCommand, AWorkerIgnoringSigtermIsKilledAfterTheGracePeriod) {
  TempDir dir;
  std::string fifo = dir.file("ready");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Rank 1 ignores SIGTERM, then tells rank 0 (through the fifo), which fails.
  auto r = launch({"-n", "2", "--timeout-grace", "0.5"},
                  "if [ $ARTEL_RANK = 0 ]; then read x < " + fifo + "; exit 1; fi; "
                  "trap '' TERM; echo go > " + fifo + "; exec sleep 60");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_GE(r.seconds, 0.5) << "SIGKILL came before the grace period was over";
  EXPECT_LT(r.seconds, 15.0) << "the worker that ignores SIGTERM was not killed";
}

TEST(LaunchCommand, RestartsOnceAndSucceedsOnTheSecondAttempt) {
  TempDir dir;
  // Every attempt of rank 0 leaves a line; rank 0 fails the first attempt only.
  auto r = launch({"-n", "2", "--max-restarts", "1"},
                  "echo \"$ARTEL_RESTART_COUNT $ARTEL_JOB_ID\" >> " + dir.str() +
                      "/attempts.$ARTEL_RANK; if [ $ARTEL_RESTART_COUNT = 0 ] && [ $ARTEL_RANK = 0 ]; then exit 5; fi");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("artel launch: worker 0 exited with status 5"));
  EXPECT_THAT(r.err, HasSubstr("artel launch: restarting all 2 workers (restart 1 of 1)"));
  auto attempts = read_lines(dir, "attempts.0");
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].substr(0, 2), "0 ");
  EXPECT_EQ(attempts[1].substr(0, 2), "1 ");
  EXPECT_NE(attempts[0].substr(2), attempts[1].substr(2)) << "each attempt gets its own job id";
  auto rank1 = read_lines(dir, "attempts.1");
  ASSERT_FALSE(rank1.empty());
  EXPECT_EQ(rank1.back(), attempts[1]) << "both ranks ran in the second attempt";
}

TEST(LaunchCommand, GivesUpWhenTheRestartsAreUsedUp) {
  TempDir dir;
  auto r = launch({"-n", "2", "--max-restarts", "2"},
                  "echo x >> " + dir.file("attempts.$ARTEL_RANK; [ $ARTEL_RANK = 1 ] && exit 4; sleep 60"));
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_EQ(read_lines(dir, "attempts.1").size(), 3u);
  EXPECT_THAT(r.err, HasSubstr("restart 2 of 2"));
  EXPECT_THAT(r.err, HasSubstr("artel launch: giving up after 2 restarts; the last failure: worker 1 exited with status 4"));
  EXPECT_LT(r.seconds, 30.0);
}

TEST(LaunchCommand, ForwardsSigtermToEveryWorker) {
  TempDir dir;
  std::string script = "trap 'echo term > " + dir.file("term.$ARTEL_RANK; exit 0' TERM; echo ready; sleep 60 & wait");
  ArtelProcess p({"launch", "-n", "3", "--", "sh", "-c", script});
  ASSERT_TRUE(p.wait_for_stdout("ready", 3, std::chrono::seconds(30))) << "the workers did not start";
  p.signal(SIGTERM);
  auto r = p.finish();
  EXPECT_EQ(r.exit_code, 128 + SIGTERM);
  EXPECT_THAT(r.err, HasSubstr("artel launch: received SIGTERM; passing it on to 3 workers"));
  for (const char* rank : {"0", "1", "2"})
    EXPECT_EQ(read_lines(dir, std::string("term.") + rank), std::vector<std::string>{"term"}) << "rank " << rank;
  EXPECT_LT(r.seconds, 30.0);
}

TEST(LaunchCommand, ForwardsSigintAndDoesNotRestart) {
  ArtelProcess p({"launch", "-n", "2", "--max-restarts", "3", "--", "sh", "-c", "echo ready; sleep 60"});
  ASSERT_TRUE(p.wait_for_stdout("ready", 2, std::chrono::seconds(30)));
  p.signal(SIGINT);
  auto r = p.finish();
  EXPECT_EQ(r.exit_code, 128 + SIGINT);
  EXPECT_THAT(r.err, HasSubstr("received SIGINT"));
  EXPECT_THAT(r.err, Not(HasSubstr("restarting")));
}

TEST(LaunchCommand, ACommandThatCannotRunIsAnErrorNotAHang) {
  auto r = ArtelProcess({"launch", "-n", "2", "--", "/nonexistent/artel-no-such-program", "x"}).finish();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("cannot run '/nonexistent/artel-no-such-program': No such file or directory"));
  r = ArtelProcess({"launch", "-n", "2", "--", "artel-no-such-program-on-path"}).finish();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("cannot run 'artel-no-such-program-on-path': No such file or directory"));
}

TEST(LaunchCommand, RejectsBadInput) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const auto& c : std::vector<Case>{
           {{"launch", "-n", "2", "--"}, "no command to launch"},
           {{"launch", "-n", "2"}, "no command to launch"},
           {{"launch", "-n", "0", "--", "true"}, "must be in [1, 4096], got 0"},
           {{"launch", "-n", "-3", "--", "true"}, "got -3"},
           {{"launch", "-n", "2", "--max-restarts", "-1", "--", "true"}, "--max-restarts must be >= 0, got -1"},
           {{"launch", "-n", "2", "--threads", "0", "--", "true"}, "--threads must be in [1, 65536], got 0"},
           {{"launch", "-n", "two", "--", "true"}, "two"},
           {{"launch", "--", "true"}, "--nproc is required"},
           {{"launch", "-n", "2", "sh", "-c", "true"}, "the workers' command goes after `--`"},
       }) {
    auto r = ArtelProcess(c.args).finish();
    EXPECT_NE(r.exit_code, 0) << c.message;
    EXPECT_THAT(r.err, HasSubstr(c.message));
    EXPECT_EQ(r.out, "");
  }
}

TEST(LaunchCommand, HelpNamesTheVariables) {
  auto r = ArtelProcess({"launch", "--help"}).finish();
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("--max-restarts"));
  EXPECT_THAT(r.out, HasSubstr("ARTEL_RESTART_COUNT"));
}

}  // namespace
}  // namespace artel::launch::testing
