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

// In the child, between fork and exec: only async-signal-safe calls. Reports
// exec's errno through `report` (closed by exec on success: O_CLOEXEC).
// A binding the kernel refuses (a core taken offline since) leaves the worker
// unbound rather than failing the job.
[[noreturn]] void exec_child(char* const* argv, char* const* envp, Pipe out, Pipe err, int report,
                             const SignalRelay& relay, const cpu_set_t* cores) {
  ::setpgid(0, 0);
  if (cores) (void)::sched_setaffinity(0, sizeof(cpu_set_t), cores);
  relay.restore_in_child();
  ::dup2(out.write, STDOUT_FILENO);
  ::dup2(err.write, STDERR_FILENO);
  ::execvpe(argv[0], argv, envp);
  int e = errno;
  (void)!::write(report, &e, sizeof e);
  ::_exit(127);
}

int read_exec_errno(int report) {
  int e = 0;
  for (;;) {
    ssize_t n = ::read(report, &e, sizeof e);
    if (n < 0 && errno == EINTR) continue;
    return n == static_cast<ssize_t>(sizeof e) ? e : 0;  // 0 bytes: exec succeeded
  }
}

}  // namespace

WorkerProcess WorkerProcess::spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                   const SignalRelay& relay, const std::vector<int>& cores) {
  ARTEL_CHECK(!argv.empty(), "a worker needs a command");
  std::vector<char*> c_argv = c_strings(argv), c_env = c_strings(env);  // before fork: no malloc after
  cpu_set_t core_set;
  CPU_ZERO(&core_set);
  for (int c : cores) CPU_SET(c, &core_set);
  Pipe out = make_pipe(), err = make_pipe(), report = make_pipe();
  pid_t pid = ::fork();
  if (pid == 0)
    exec_child(c_argv.data(), c_env.data(), out, err, report.write, relay, cores.empty() ? nullptr : &core_set);
  int fork_errno = errno;
  for (int fd : {out.write, err.write, report.write}) ::close(fd);
  if (pid < 0) {
    for (int fd : {out.read, err.read, report.read}) ::close(fd);
    throw Error(detail::concat("cannot start a worker: fork failed: ", std::strerror(fork_errno)));
  }
  ::setpgid(pid, pid);  // also here, so the group exists before we might signal it
  int exec_errno = read_exec_errno(report.read);
  ::close(report.read);
  WorkerProcess w(pid, out.read, err.read);
  for (int fd : {out.read, err.read}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  if (exec_errno != 0) {
    w.signal_group(SIGKILL);
    throw Error(detail::concat("cannot run '", argv[0], "': ", std::strerror(exec_errno)),
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
