#include "artel/launch/line_prefixer.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace artel::launch {

void write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t k = ::write(fd, data, n);
    if (k < 0) {
      if (errno == EINTR) continue;
      return;  // EPIPE, EBADF...: nobody can read it, and stopping workers matters more
    }
    data += k;
    n -= static_cast<size_t>(k);
  }
}

void LinePrefixer::feed(const char* data, size_t n) {
  while (n > 0) {
    const char* nl = static_cast<const char*>(std::memchr(data, '\n', n));
    size_t take = nl ? static_cast<size_t>(nl - data) : n;
    if (partial_.empty() && nl) {
      add_line(data, take);  // the common case: a whole line, no copy into partial_
    } else {
      partial_.append(data, take);
      if (nl || partial_.size() >= kMaxLine) {
        add_line(partial_.data(), partial_.size());
        partial_.clear();
      }
    }
    size_t used = nl ? take + 1 : take;
    data += used;
    n -= used;
  }
  flush();
}

void LinePrefixer::finish() {
  if (!partial_.empty()) add_line(partial_.data(), partial_.size());
  partial_.clear();
  flush();
}

void LinePrefixer::add_line(const char* line, size_t n) {
  if (keep_ && !keep_(std::string_view(line, n))) return;
  pending_.append(prefix_);
  pending_.append(line, n);
  pending_.push_back('\n');
}

void LinePrefixer::flush() {
  write_all(out_fd_, pending_.data(), pending_.size());
  pending_.clear();
}

}  // namespace artel::launch
