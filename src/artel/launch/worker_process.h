// One worker: a child process in its own process group (so a signal reaches
// the whole tree it starts), with its stdout and stderr on pipes the launcher
// reads. Spawning waits until exec() succeeded or failed, so a command that
// cannot run is an immediate artel::Error ("cannot run 'x': No such file or
// directory"), never a worker that silently exits 127; the same goes for a
// worker that cannot join its cgroups.
//
//   WorkerProcess w = WorkerProcess::spawn({"sh", "-c", "echo hi"}, env, relay);
//   poll on w.out_fd(), w.err_fd(); w.signal_group(SIGTERM); w.try_reap();
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace artel::launch {

class SignalRelay;

// A cgroup for the worker to join between fork and exec, so that all it
// allocates and runs after exec is charged there (worker_cgroup.h makes one).
struct CgroupJoin {
  int procs_fd = -1;         // its cgroup.procs, open for writing
  std::string path;          // for the error message
  const char* hint = "";     // what to do when it cannot be joined
};

class WorkerProcess {
 public:
  // argv[0] is looked up on PATH; env is the complete environment ("K=V");
  // a non-empty `cores` binds the worker (and all it starts) to those cores;
  // `cgroups` puts it in those cgroups before exec, and a worker that cannot
  // join is an artel::Error like a command that cannot run.
  static WorkerProcess spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                             const SignalRelay& relay, const std::vector<int>& cores = {},
                             const std::vector<CgroupJoin>& cgroups = {});

  WorkerProcess(WorkerProcess&& other) noexcept;
  WorkerProcess& operator=(WorkerProcess&&) = delete;
  WorkerProcess(const WorkerProcess&) = delete;
  ~WorkerProcess();  // kills the group and reaps it if still running

  pid_t pid() const { return pid_; }
  // -1 once closed.
  int out_fd() const { return out_fd_; }
  int err_fd() const { return err_fd_; }
  void close_out();
  void close_err();

  bool running() const { return !status_.has_value(); }
  // The wait status once the process has exited.
  const std::optional<int>& status() const { return status_; }
  // Reaps without blocking; true when the process has exited (now or before).
  bool try_reap();
  // Sends sig to the process group (the worker and what it started).
  void signal_group(int sig) const;

 private:
  WorkerProcess(pid_t pid, int out_fd, int err_fd) : pid_(pid), out_fd_(out_fd), err_fd_(err_fd) {}

  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;
  std::optional<int> status_;
};

}  // namespace artel::launch
