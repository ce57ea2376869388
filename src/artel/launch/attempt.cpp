#include "artel/launch/attempt.h"

#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <span>
#include <sstream>
#include <string_view>

#include "artel/core/memory_limit.h"
#include "artel/core/shm_names.h"
#include "artel/core/threads.h"
#include "artel/launch/core_binding.h"
#include "artel/launch/exit_status.h"
#include "artel/launch/line_prefixer.h"
#include "artel/launch/signal_relay.h"
#include "artel/launch/worker_cgroup.h"
#include "artel/launch/worker_env.h"
#include "artel/launch/worker_process.h"

extern char** environ;

namespace artel::launch {
namespace {

using Clock = std::chrono::steady_clock;

// How long ranks that may fail get to finish once every other rank has (stop_leftovers).
constexpr auto kLeftoverGrace = std::chrono::seconds(5);

// After the last worker exits, how long to wait for its pipes to reach EOF (a
// process it left behind may still hold them open).
constexpr auto kDrainTimeout = std::chrono::milliseconds(500);

std::string plural(int n, const char* one, const char* many) { return n == 1 ? one : many; }

// Note [One thread, one loop]: every worker pipe and the signal relay are
// polled by this one loop, so output lines are written whole and in order, and
// a signal is handled between two reads, never in the middle of one.
class Attempt {
 public:
  Attempt(const LaunchConfig& config, SignalRelay& relay, const AttemptSpec& spec)
      : config_(config), relay_(relay), spec_(spec) {}

  AttemptResult run() {
    std::vector<std::vector<int>> cores(static_cast<size_t>(config_.nproc));
    if (config_.bind_to_core) cores = core_binding(config_.nproc, config_.threads_per_worker(), allowed_cores());
    make_cgroups();
    for (int rank = 0; rank < config_.nproc; ++rank) {
      workers_.push_back(WorkerProcess::spawn(config_.command, worker_environment(config_, spec_, rank), relay_,
                                              cores[static_cast<size_t>(rank)], joins_of(rank)));
      std::string prefix = std::to_string(rank);
      prefix.insert(0, 1, '[').append("] ");  // not "[" + ...: GCC 12 warns falsely (-Wrestrict)
      out_.emplace_back(prefix, config_.out_fd);
      err_.emplace_back(prefix, config_.err_fd, [this, rank](std::string_view line) { return first_to_say(rank, line); });
    }
    while (reap() < config_.nproc) {
      stop_leftovers();
      if (kill_at_ && Clock::now() >= *kill_at_) {
        kill_at_.reset();
        for (auto& w : workers_) if (w.running()) w.signal_group(SIGKILL);
      }
      pump(poll_timeout_ms());
    }
    drain(Clock::now() + kDrainTimeout);
    // Every worker has exited: nothing of this job can still open its
    // segments, and those of a worker killed mid-start would leak otherwise.
    remove_job_shm(spec_.job_id);
    // Reaped, so empty (their OOM records were read as they failed): the
    // cgroups can go. On an exception, the destructors remove them instead.
    for (auto& cg : cgroups_)
      if (std::string e = cg.remove(); !e.empty()) say("artel launch: " + e);
    return result_;
  }

 private:
  // One cgroup per worker under each parent, all made before the first worker starts.
  void make_cgroups() {
    if (spec_.cgroups == nullptr) return;
    std::string stem = "artel-" + std::to_string(::getpid()) + "-" + std::to_string(spec_.restart_count) + "-w";
    const WorkerLimits limits{config_.memory_per_worker, config_.cpus_per_worker};
    for (int rank = 0; rank < config_.nproc; ++rank)
      for (const CgroupParent& parent : *spec_.cgroups)
        cgroups_.push_back(WorkerCgroup::create(parent, stem + std::to_string(rank), limits));
  }

  // Worker rank's cgroups: cgroups_[rank * parents, (rank + 1) * parents).
  std::span<const WorkerCgroup> cgroups_of(int rank) const {
    const size_t per_worker = spec_.cgroups == nullptr ? 0 : spec_.cgroups->size();
    return std::span<const WorkerCgroup>(cgroups_).subspan(static_cast<size_t>(rank) * per_worker, per_worker);
  }

  std::vector<CgroupJoin> joins_of(int rank) const {
    std::vector<CgroupJoin> joins;
    for (const WorkerCgroup& cg : cgroups_of(rank)) joins.push_back(cg.join());
    return joins;
  }

  bool out_of_memory(int rank) const {
    const std::span<const WorkerCgroup> own = cgroups_of(rank);
    return std::any_of(own.begin(), own.end(), [](const WorkerCgroup& cg) { return cg.oom_killed(); });
  }

  // Reaps what has exited; starts stopping the others on the first failure.
  // Returns how many workers have exited.
  int reap() {
    int exited = 0;
    for (int rank = 0; rank < config_.nproc; ++rank) {
      WorkerProcess& w = workers_[rank];
      bool was_running = w.running();
      if (!w.try_reap()) continue;
      ++exited;
      if (was_running && !exited_cleanly(*w.status()) && !stopping_) on_failure(rank);
    }
    return exited;
  }

  void on_failure(int rank) {
    read_available(rank);  // its last words before our message about it
    const int status = *workers_[rank].status();
    const bool last_to_fail = all_that_may_fail_failed();
    if (std::find(config_.may_fail.begin(), config_.may_fail.end(), rank) != config_.may_fail.end() && !last_to_fail) {
      say("artel launch: " + config_.name_of(rank) + " " + describe_exit(status) + "; the job goes on without it (" +
          config_.may_fail_reason + ")");
      return;
    }
    // The kernel's OOM kill leaves the worker no chance to say why; its cgroup knows.
    const bool oom = out_of_memory(rank);
    result_ = {AttemptResult::kWorkerFailed, rank, status, oom, 0};
    int others = running_count();
    std::string line = "artel launch: " + config_.name_of(rank) + " " +
                       (oom ? describe_out_of_memory(status, *config_.memory_per_worker) : describe_exit(status));
    if (last_to_fail) line += "; every rank that may drop out has failed, so the job cannot go on";
    if (others > 0) line += "; stopping the other " + std::to_string(others) + plural(others, " worker", " workers");
    if (oom) line += " (hint: " + out_of_memory_hint() + ")";
    say(line);
    stop(SIGTERM);
  }

  void on_signal(int sig) {
    if (sig == SIGCHLD) return;  // reap() runs on every turn of the loop
    if (result_.outcome == AttemptResult::kInterrupted) {
      say("artel launch: received " + signal_name(sig) + " again; killing the workers");
      for (auto& w : workers_) if (w.running()) w.signal_group(SIGKILL);
      return;
    }
    int n = running_count();
    say("artel launch: received " + signal_name(sig) + "; passing it on to " + std::to_string(n) +
        plural(n, " worker", " workers"));
    result_ = {AttemptResult::kInterrupted, -1, 0, false, sig};
    stop(sig);
  }

  // Sends sig to every running worker's group; SIGKILL follows after the grace period.
  void stop(int sig) {
    stopping_ = true;
    for (auto& w : workers_) if (w.running()) w.signal_group(sig);
    kill_at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(config_.grace_s));
  }

  int poll_timeout_ms() const {
    constexpr int kTick = 1000;  // a backstop only: SIGCHLD wakes the loop
    if (!kill_at_) return kTick;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*kill_at_ - Clock::now()).count();
    return static_cast<int>(std::clamp<long long>(left + 1, 0, kTick));
  }

  // One poll() over the relay and all open pipes; handles what is ready.
  void pump(int timeout_ms) {
    std::vector<pollfd> fds{{relay_.fd(), POLLIN, 0}};
    for (auto& w : workers_)
      for (int fd : {w.out_fd(), w.err_fd()}) if (fd >= 0) fds.push_back({fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0) return;  // EINTR: the relay has the signal
    if (fds[0].revents) for (int sig : relay_.take()) on_signal(sig);
    for (int rank = 0; rank < config_.nproc; ++rank) read_available(rank);
  }

  // Reads what a worker's pipes hold now, without blocking; closes them at EOF.
  void read_available(int rank) {
    WorkerProcess& w = workers_[rank];
    if (w.out_fd() >= 0 && !read_pipe(w.out_fd(), out_[rank])) w.close_out();
    if (w.err_fd() >= 0 && !read_pipe(w.err_fd(), err_[rank])) w.close_err();
  }

  // False at EOF (or a read error), after flushing the partial last line.
  // Reads at most kReadsPerTurn buffers, so a worker that writes without pause
  // cannot keep the loop from reaping and handling signals.
  static bool read_pipe(int fd, LinePrefixer& sink) {
    constexpr int kReadsPerTurn = 16;
    char buf[64 * 1024];
    for (int reads = 0; reads < kReadsPerTurn; ++reads) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) {
        sink.feed(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return true;
      sink.finish();
      return false;
    }
    return true;
  }

  // All workers have exited: take what is left in the pipes until EOF or the deadline.
  void drain(Clock::time_point deadline) {
    auto open = [&] {
      return std::any_of(workers_.begin(), workers_.end(), [](auto& w) { return w.out_fd() >= 0 || w.err_fd() >= 0; });
    };
    while (open() && Clock::now() < deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      pump(static_cast<int>(std::max<long long>(left, 0)));
    }
    for (int rank = 0; rank < config_.nproc; ++rank) {
      out_[rank].finish();
      err_[rank].finish();
    }
  }

  // Ranks that may fail are not waited for forever: once every other rank
  // has exited cleanly, those still running (a stopped worker the servers
  // dropped) get kLeftoverGrace to finish, then are stopped.
  void stop_leftovers() {
    if (config_.may_fail.empty() || stopping_) return;
    std::string left;
    for (int rank = 0; rank < config_.nproc; ++rank) {
      const bool may_fail = std::find(config_.may_fail.begin(), config_.may_fail.end(), rank) != config_.may_fail.end();
      if (!may_fail && workers_[rank].running()) return;
      if (!workers_[rank].running()) continue;
      if (!left.empty()) left += ", ";
      left += std::to_string(rank);
    }
    if (left.empty()) return;
    if (!leftover_deadline_) leftover_deadline_ = Clock::now() + kLeftoverGrace;
    if (Clock::now() < *leftover_deadline_) return;
    say("artel launch: every other rank has finished; stopping worker(s) " + left + " (" + config_.may_fail_reason + ")");
    stop(SIGTERM);
  }

  // Every rank that may fail has exited, none of them cleanly: the job has
  // no one left to do its work (the parameter servers' workers all gone,
  // often because a server stopped), and the rest would wait forever.
  bool all_that_may_fail_failed() const {
    if (config_.may_fail.empty()) return false;
    for (int rank : config_.may_fail) {
      const WorkerProcess& w = workers_[rank];
      if (w.running() || !w.status() || exited_cleanly(*w.status())) return false;
    }
    return true;
  }

  // An error line another worker already said word for word is not written
  // again: a check every worker makes alike (an --init that does not fit the
  // model, a bad flag) fails them all at once, and the user reads it once,
  // then the launcher's line naming the worker. Errors that differ between
  // workers (each names its own peer or shard) all get through. So do notes
  // (a /dev/shm too small for every worker's registered memory).
  bool first_to_say(int rank, std::string_view line) {
    constexpr size_t kRemembered = 1024;  // a worker that logs errors without end cannot grow the launcher
    if (line.find("error:") == std::string_view::npos && line.find("note:") == std::string_view::npos) return true;
    if (const auto it = said_errors_.find(line); it != said_errors_.end()) return it->second == rank;
    if (said_errors_.size() < kRemembered) said_errors_.emplace(std::string(line), rank);
    return true;
  }

  int running_count() const {
    return static_cast<int>(std::count_if(workers_.begin(), workers_.end(), [](auto& w) { return w.running(); }));
  }

  void say(std::string line) {
    line.push_back('\n');
    write_all(config_.err_fd, line.data(), line.size());
  }

  const LaunchConfig& config_;
  SignalRelay& relay_;
  const AttemptSpec& spec_;
  // Before workers_: members are destroyed in reverse, so on an exception the
  // workers are killed and reaped first, and then their emptied cgroups removed.
  std::vector<WorkerCgroup> cgroups_;
  std::vector<WorkerProcess> workers_;
  std::vector<LinePrefixer> out_, err_;
  std::map<std::string, int, std::less<>> said_errors_;  // error line -> the rank that said it first
  std::optional<Clock::time_point> kill_at_;
  std::optional<Clock::time_point> leftover_deadline_;  // stop_leftovers()
  bool stopping_ = false;
  AttemptResult result_;
};

bool is_launch_variable(const char* entry) {
  for (const char* name : {kEnvRank, kEnvWorldSize, kEnvLocalRank, kEnvJobId, kEnvNumThreads, kEnvRestartCount,
                           kEnvCpusPerWorker, kMemoryLimitVariable}) {
    size_t n = std::strlen(name);
    if (std::strncmp(entry, name, n) == 0 && entry[n] == '=') return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> worker_environment(const LaunchConfig& config, const AttemptSpec& spec, int rank) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e)
    if (!is_launch_variable(*e)) env.emplace_back(*e);
  auto set = [&](const char* name, const std::string& value) { env.push_back(std::string(name) + "=" + value); };
  set(kEnvRank, std::to_string(rank));
  set(kEnvWorldSize, std::to_string(config.nproc));
  set(kEnvLocalRank, std::to_string(rank));  // one host: the local rank is the rank
  set(kEnvJobId, spec.job_id);
  set(kEnvNumThreads, std::to_string(config.threads_per_worker()));
  set(kEnvRestartCount, std::to_string(spec.restart_count));
  if (config.memory_per_worker) set(kMemoryLimitVariable, std::to_string(*config.memory_per_worker));
  if (config.cpus_per_worker) {
    std::ostringstream cpus;
    cpus << *config.cpus_per_worker;
    set(kEnvCpusPerWorker, cpus.str());
  }
  return env;
}

AttemptResult run_attempt(const LaunchConfig& config, SignalRelay& relay, const AttemptSpec& spec) {
  return Attempt(config, relay, spec).run();
}

}  // namespace artel::launch
