#include "artel/launch/worker_process.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "artel/core/error.h"
#include "artel/launch/signal_relay.h"

namespace artel::launch {
namespace {

struct Pipe {
  int read = -1, write = -1;
};

Pipe make_pipe() {
  int fds[2];
  ARTEL_CHECK(::pipe2(fds, O_CLOEXEC) == 0, "cannot create a pipe for a worker: ", std::strerror(errno),
              " (hint: too many open files? raise `ulimit -n` or start fewer workers)");
  return {fds[0], fds[1]};
}

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// What the child reports through the close-on-exec pipe when it fails before
// or at exec: nothing at all means exec succeeded.
struct ChildFailure {
  enum Step : int { kExec, kJoinCgroup };
  int step = kExec;
  int err = 0;     // errno
  int cgroup = 0;  // kJoinCgroup: which one
};

// Writes this process's pid into a cgroup.procs file: with write() and
// digits formed by hand, as the child of a multithreaded fork may only make
// async-signal-safe calls.
bool join_cgroup(int procs_fd) {
  char digits[24], *end = digits + sizeof digits, *p = end;
  for (long v = ::getpid(); p == end || v > 0; v /= 10) *--p = static_cast<char>('0' + v % 10);
  return ::write(procs_fd, p, static_cast<size_t>(end - p)) == end - p;
}

// In the child, between fork and exec: only async-signal-safe calls. Reports
// a failure through `report` (closed by exec on success: O_CLOEXEC).
// The cgroups come first, so that everything the worker allocates is charged
// to them. A binding the kernel refuses (a core taken offline since) leaves the
// worker unbound rather than failing the job.
[[noreturn]] void exec_child(char* const* argv, char* const* envp, Pipe out, Pipe err, int report,
                             const SignalRelay& relay, const cpu_set_t* cores, const int* cgroup_procs_fds,
                             int cgroups) {
  ChildFailure failure;
  for (int i = 0; i < cgroups; ++i) {
    if (join_cgroup(cgroup_procs_fds[i])) continue;
    failure = {ChildFailure::kJoinCgroup, errno != 0 ? errno : EIO, i};  // a short write sets no errno
    (void)!::write(report, &failure, sizeof failure);
    ::_exit(127);
  }
  ::setpgid(0, 0);
  if (cores) (void)::sched_setaffinity(0, sizeof(cpu_set_t), cores);
  relay.restore_in_child();
  ::dup2(out.write, STDOUT_FILENO);
  ::dup2(err.write, STDERR_FILENO);
  ::execvpe(argv[0], argv, envp);
  failure = {ChildFailure::kExec, errno};
  (void)!::write(report, &failure, sizeof failure);
  ::_exit(127);
}

ChildFailure read_child_failure(int report) {
  ChildFailure f;
  for (;;) {
    ssize_t n = ::read(report, &f, sizeof f);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof f)) f.err = 0;  // 0 bytes: exec succeeded
    return f;
  }
}

}  // namespace

WorkerProcess WorkerProcess::spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                   const SignalRelay& relay, const std::vector<int>& cores,
                                   const std::vector<CgroupJoin>& cgroups) {
  ARTEL_CHECK(!argv.empty(), "a worker needs a command");
  std::vector<char*> c_argv = c_strings(argv), c_env = c_strings(env);  // before fork: no malloc after
  std::vector<int> procs_fds;
  for (const CgroupJoin& c : cgroups) procs_fds.push_back(c.procs_fd);
  cpu_set_t core_set;
  CPU_ZERO(&core_set);
  for (int c : cores) CPU_SET(c, &core_set);
  Pipe out = make_pipe(), err = make_pipe(), report = make_pipe();
  pid_t pid = ::fork();
  if (pid == 0)
    exec_child(c_argv.data(), c_env.data(), out, err, report.write, relay, cores.empty() ? nullptr : &core_set,
               procs_fds.data(), static_cast<int>(procs_fds.size()));
  int fork_errno = errno;
  for (int fd : {out.write, err.write, report.write}) ::close(fd);
  if (pid < 0) {
    for (int fd : {out.read, err.read, report.read}) ::close(fd);
    throw Error(detail::concat("cannot start a worker: fork failed: ", std::strerror(fork_errno)));
  }
  ::setpgid(pid, pid);  // also here, so the group exists before we might signal it
  ChildFailure failure = read_child_failure(report.read);
  ::close(report.read);
  WorkerProcess w(pid, out.read, err.read);
  for (int fd : {out.read, err.read}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  if (failure.err != 0) {
    w.signal_group(SIGKILL);
    if (failure.step == ChildFailure::kJoinCgroup) {
      const CgroupJoin& c = cgroups.at(static_cast<size_t>(failure.cgroup));
      throw Error(detail::concat("cannot put a worker in its cgroup: writing its pid to ", c.path,
                                 "/cgroup.procs failed: ", std::strerror(failure.err)),
                  c.hint);
    }
    throw Error(detail::concat("cannot run '", argv[0], "': ", std::strerror(failure.err)),
                "check the command after `--`: it must be on PATH or a path to an executable file");
  }
  return w;
}

WorkerProcess::WorkerProcess(WorkerProcess&& other) noexcept
    : pid_(other.pid_), out_fd_(other.out_fd_), err_fd_(other.err_fd_), status_(other.status_) {
  other.pid_ = -1;
  other.out_fd_ = other.err_fd_ = -1;
}

WorkerProcess::~WorkerProcess() {
  if (pid_ > 0 && running()) {
    signal_group(SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  close_out();
  close_err();
}

void WorkerProcess::close_out() {
  if (out_fd_ >= 0) ::close(out_fd_);
  out_fd_ = -1;
}

void WorkerProcess::close_err() {
  if (err_fd_ >= 0) ::close(err_fd_);
  err_fd_ = -1;
}

bool WorkerProcess::try_reap() {
  if (!running()) return true;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) status_ = status;
  return !running();
}

void WorkerProcess::signal_group(int sig) const {
  if (pid_ > 0) ::kill(-pid_, sig);
}

}  // namespace artel::launch
