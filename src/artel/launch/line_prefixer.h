// Splits one worker's output stream into lines and writes them, each with the
// worker's prefix, to a file descriptor: whole lines only, all the lines of one
// feed() in one write() — so lines of different workers never interleave
// mid-line when one thread serves all of them.
//
//   LinePrefixer out("[3] ", STDOUT_FILENO);
//   out.feed(buf, n);   // as many times as data arrives
//   out.finish();       // at EOF: a last line without '\n' gets one
//
// A filter, when given, sees each line before its prefix and drops the
// lines it returns false for (the launcher's: an error every worker says
// word for word is written once).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace artel::launch {

class LinePrefixer {
 public:
  // A line longer than this is cut and written in pieces, so a worker that never
  // writes '\n' cannot make the launcher's memory grow without bound.
  static constexpr size_t kMaxLine = 64 * 1024;

  using Filter = std::function<bool(std::string_view line)>;  // true: write the line

  LinePrefixer(std::string prefix, int out_fd, Filter keep = {})
      : prefix_(std::move(prefix)), out_fd_(out_fd), keep_(std::move(keep)) {}

  void feed(const char* data, size_t n);
  void finish();

 private:
  void add_line(const char* line, size_t n);  // n bytes without the '\n', to pending_
  void flush();                               // writes pending_

  std::string prefix_;
  int out_fd_;
  Filter keep_;
  std::string partial_;  // the start of a line whose '\n' has not arrived yet
  std::string pending_;  // whole prefixed lines not written yet; reused between feeds
};

// Writes all n bytes, retrying on EINTR and short writes. Gives up silently
// when the reader has gone (EPIPE): the launcher must keep supervising.
void write_all(int fd, const char* data, size_t n);

}  // namespace artel::launch
