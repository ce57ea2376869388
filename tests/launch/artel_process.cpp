#include "launch/artel_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace artel::launch::testing {

using Clock = std::chrono::steady_clock;

ArtelProcess::ArtelProcess(const std::vector<std::string>& args) {
  if (::access(ARTEL_BINARY, X_OK) != 0)
    ADD_FAILURE() << "the program " << ARTEL_BINARY << " is missing: build the target artel_cli first";
  std::vector<std::string> argv{ARTEL_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> c_argv;
  for (auto& a : argv) c_argv.push_back(a.data());
  c_argv.push_back(nullptr);
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) std::abort();
  start_ = Clock::now();
  pid_ = ::fork();
  if (pid_ == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    ::execv(c_argv[0], c_argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
  pid_fd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
  if (pid_ < 0 || pid_fd_ < 0) std::abort();
}

ArtelProcess::~ArtelProcess() {
  if (!exited_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  for (int fd : {out_fd_, err_fd_, pid_fd_})
    if (fd >= 0) ::close(fd);
}

void ArtelProcess::signal(int sig) const { ::kill(pid_, sig); }

bool ArtelProcess::pump(Clock::time_point deadline) {
  std::vector<pollfd> fds;
  for (int fd : {out_fd_, err_fd_})
    if (fd >= 0) fds.push_back({fd, POLLIN, 0});
  if (!exited_) fds.push_back({pid_fd_, POLLIN, 0});
  if (fds.empty()) return false;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0 || ::poll(fds.data(), fds.size(), static_cast<int>(left)) <= 0) return false;
  for (auto& p : fds) {
    if (!p.revents) continue;
    if (p.fd == pid_fd_) {
      int status = 0;
      ::waitpid(pid_, &status, 0);
      exited_ = true;
      result_.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
      result_.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      continue;
    }
    char buf[65536];
    ssize_t n = ::read(p.fd, buf, sizeof buf);
    std::string& sink = p.fd == out_fd_ ? result_.out : result_.err;
    if (n > 0) {
      sink.append(buf, static_cast<size_t>(n));
    } else {
      ::close(p.fd);
      (p.fd == out_fd_ ? out_fd_ : err_fd_) = -1;
    }
  }
  return true;
}

bool ArtelProcess::wait_for_stdout(const std::string& text, int count, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  auto seen = [&] {
    int n = 0;
    for (size_t at = result_.out.find(text); at != std::string::npos; at = result_.out.find(text, at + 1)) ++n;
    return n >= count;
  };
  while (!seen())
    if (!pump(deadline)) return seen();
  return true;
}

ArtelProcess::Result ArtelProcess::finish(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (pump(deadline)) {
  }
  if (!exited_ || out_fd_ >= 0 || err_fd_ >= 0) {
    ADD_FAILURE() << "artel did not finish within " << timeout.count() << " ms; killing it\nstdout:\n"
                  << result_.out << "\nstderr:\n" << result_.err;
    ::kill(pid_, SIGKILL);
  }
  return result_;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> read_lines(const TempDir& dir, const std::string& name) {
  std::ifstream in(dir.file(name));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace artel::launch::testing
