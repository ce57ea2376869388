// Turns SIGINT, SIGTERM and SIGCHLD into bytes on a pipe (the self-pipe trick),
// so the launcher's single poll() loop wakes for a signal exactly as it wakes
// for worker output, and never does real work inside a signal handler.
//
//   SignalRelay relay;                       // installs the handlers
//   poll({relay.fd(), POLLIN, 0}, ...);
//   for (int sig : relay.take()) ...;        // SIGCHLD: reap; others: forward
//   // the destructor puts the previous handlers back
//
// One relay per process at a time (signal dispositions are process-wide);
// a second one throws artel::Error.
#pragma once

#include <signal.h>

#include <vector>

namespace artel::launch {

class SignalRelay {
 public:
  SignalRelay();
  ~SignalRelay();
  SignalRelay(const SignalRelay&) = delete;
  SignalRelay& operator=(const SignalRelay&) = delete;

  int fd() const { return read_fd_; }
  // The signals received since the last call, in arrival order; never blocks.
  std::vector<int> take();

  // For a forked child before exec: puts back the dispositions the launcher
  // found, so workers inherit what the launcher inherited. Async-signal-safe.
  void restore_in_child() const;

 private:
  static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGCHLD, SIGPIPE};
  struct sigaction old_[4];
  int read_fd_ = -1;
};

}  // namespace artel::launch
