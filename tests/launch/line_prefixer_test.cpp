#include "artel/launch/line_prefixer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace artel::launch {
namespace {

// Captures what a LinePrefixer writes, in an in-memory file.
class Capture {
 public:
  Capture() : fd_(::memfd_create("capture", MFD_CLOEXEC)) { EXPECT_GE(fd_, 0); }
  ~Capture() { ::close(fd_); }
  int fd() const { return fd_; }
  // What was written since the last call.
  std::string take() {
    std::string s;
    char buf[4096];
    for (ssize_t n; (n = ::pread(fd_, buf, sizeof buf, static_cast<off_t>(read_))) > 0; read_ += n)
      s.append(buf, static_cast<size_t>(n));
    return s;
  }

 private:
  int fd_;
  size_t read_ = 0;
};

TEST(LinePrefixer, PrefixesWholeLinesAcrossFeeds) {
  Capture cap;
  LinePrefixer p("[1] ", cap.fd());
  p.feed("hel", 3);
  EXPECT_EQ(cap.take(), "");  // nothing until the line is complete
  p.feed("lo\nwor", 6);
  EXPECT_EQ(cap.take(), "[1] hello\n");
  p.feed("ld\n\nx\n", 6);
  EXPECT_EQ(cap.take(), "[1] world\n[1] \n[1] x\n");
}

TEST(LinePrefixer, FinishFlushesAPartialLastLine) {
  Capture cap;
  LinePrefixer p("[0] ", cap.fd());
  p.feed("no newline", 10);
  p.finish();
  EXPECT_EQ(cap.take(), "[0] no newline\n");
  p.finish();  // nothing left: writes nothing
  EXPECT_EQ(cap.take(), "");
}

TEST(LinePrefixer, CutsLinesLongerThanTheLimit) {
  Capture cap;
  LinePrefixer p("[2] ", cap.fd());
  std::string chunk(1000, 'a');
  for (size_t fed = 0; fed < LinePrefixer::kMaxLine; fed += chunk.size()) p.feed(chunk.data(), chunk.size());
  std::string out = cap.take();
  ASSERT_FALSE(out.empty()) << "an endless line must be written out, not buffered forever";
  EXPECT_EQ(out.substr(0, 4), "[2] ");
  EXPECT_EQ(out.back(), '\n');
  EXPECT_EQ(out.find('\n'), out.size() - 1) << "written as one line";
  p.feed("b\n", 2);
  EXPECT_EQ(cap.take(), "[2] b\n");
}

TEST(LinePrefixer, AFilterDropsTheLinesItRefusesBeforeTheirPrefix) {
  Capture cap;
  std::vector<std::string> seen;
  LinePrefixer p("[1] ", cap.fd(), [&](std::string_view line) {
    seen.emplace_back(line);
    return line != "drop";
  });
  p.feed("keep\ndrop\nkeep too\n", 19);
  EXPECT_EQ(cap.take(), "[1] keep\n[1] keep too\n");
  EXPECT_EQ(seen, (std::vector<std::string>{"keep", "drop", "keep too"})) << "the filter sees lines without the prefix";
}

}  // namespace
}  // namespace artel::launch
