// Runs the real `artel` program (ARTEL_BINARY) as a child of the test, with
// its stdout and stderr captured, and waits on it with deadlines — never a
// sleep: poll() on its pipes and on a pidfd that becomes readable at exit.
//
//   ArtelProcess p({"launch", "-n", "2", "--", "sh", "-c", "echo hi"});
//   ArtelProcess::Result r = p.finish();
//   EXPECT_EQ(r.exit_code, 0);
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "temp_dir.h"

namespace artel::launch::testing {

class ArtelProcess {
 public:
  struct Result {
    int exit_code = -1;  // 128 + signal when the program itself was killed
    std::string out, err;
    double seconds = 0;  // from start to exit
  };

  explicit ArtelProcess(const std::vector<std::string>& args);
  ~ArtelProcess();
  ArtelProcess(const ArtelProcess&) = delete;
  ArtelProcess& operator=(const ArtelProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Reads output until stdout holds `text` at least `count` times; false on timeout.
  bool wait_for_stdout(const std::string& text, int count, std::chrono::milliseconds timeout);
  void signal(int sig) const;
  // Reads to the end and reaps. On timeout the program is killed and the test fails.
  Result finish(std::chrono::milliseconds timeout = std::chrono::seconds(60));

 private:
  // One poll() round over the pipes and the pidfd; false when nothing is left to wait for.
  bool pump(std::chrono::steady_clock::time_point deadline);

  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1, pid_fd_ = -1;
  bool exited_ = false;
  Result result_;
  std::chrono::steady_clock::time_point start_;
};

// `text` split into lines (a program's stdout, a file's contents).
std::vector<std::string> lines_of(const std::string& text);

using test_support::TempDir;

// The contents of dir/name split into lines; empty when it does not exist.
std::vector<std::string> read_lines(const TempDir& dir, const std::string& name);

}  // namespace artel::launch::testing
