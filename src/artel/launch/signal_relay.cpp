#include "artel/launch/signal_relay.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "artel/core/error.h"

namespace artel::launch {
namespace {

// The handler can reach only globals; this is the write end of the one relay.
std::atomic<int> g_write_fd{-1};

extern "C" void relay_handler(int sig) {
  int saved = errno;
  unsigned char byte = static_cast<unsigned char>(sig);
  int fd = g_write_fd.load();
  if (fd >= 0) (void)!::write(fd, &byte, 1);  // pipe full: a wake-up is pending anyway
  errno = saved;
}

}  // namespace

SignalRelay::SignalRelay() {
  int fds[2];
  ARTEL_CHECK(::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0, "artel launch: cannot create a pipe: ", std::strerror(errno));
  int expected = -1;
  if (!g_write_fd.compare_exchange_strong(expected, fds[1])) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error("a launcher is already running in this process", "run one launch() at a time");
  }
  read_fd_ = fds[0];
  struct sigaction sa {};
  sa.sa_handler = relay_handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  for (int i = 0; i < 4; ++i) {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    // SIGPIPE ignored: a closed stdout must not kill the launcher and orphan workers.
    ::sigaction(kSignals[i], kSignals[i] == SIGPIPE ? &ignore : &sa, &old_[i]);
  }
}

SignalRelay::~SignalRelay() {
  for (int i = 0; i < 4; ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
  int fd = g_write_fd.exchange(-1);
  ::close(fd);
  ::close(read_fd_);
}

std::vector<int> SignalRelay::take() {
  std::vector<int> got;
  unsigned char buf[64];
  for (;;) {
    ssize_t n = ::read(read_fd_, buf, sizeof buf);
    if (n > 0) {
      got.insert(got.end(), buf, buf + n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return got;  // EAGAIN: drained
  }
}

void SignalRelay::restore_in_child() const {
  for (int i = 0; i < 4; ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
}

}  // namespace artel::launch
